"""A release's data-use terms (issue 34), as its manifest and its data card
state them: the sources its stays came from, the strictest of their terms,
who may receive it, the citations its users owe, and, for a Scale release,
where its Oracle run sent the contexts and on which attestations."""

from __future__ import annotations

from datause.selectors import data_use_of, egress_decision_for_run
from windows.datasources import DataUse, data_use_of_stays
from windows.models import DataUseTerms, Stay

ACCESS = {
    DataUseTerms.OPEN: "Open: any researcher of the platform may list and download it.",
    DataUseTerms.CREDENTIALED: "Credentialed: only researchers whose account "
    "records approved, unexpired PhysioNet credentialed access to each source "
    "below may list and download it; it may not be shared with anyone else, "
    "nor sent to a third-party service (an API) that has not been attested for "
    "zero retention, no training and no human review.",
    DataUseTerms.RESTRICTED: "Restricted to this site: only researchers whose "
    "account records access to each source below, approved by an admin, may "
    "list and download it; it does not leave the site.",
}


def release_data_use(release, *, stay_ids=None) -> DataUse:
    """The terms of ``release``: of the stays it holds (``stay_ids``, while it
    is built), else as recorded or from its inputs (datause.selectors)."""
    if stay_ids is not None:
        return data_use_of_stays(Stay.objects.filter(pk__in=list(stay_ids)))
    return data_use_of(release)


def release_data_use_section(release, *, stay_ids=None) -> dict:
    """The manifest's ``data_use``: terms, sources with their agreements and
    citations, who may receive the release, and the egress of the Oracle run
    it is built from (a Scale release)."""
    data_use = release_data_use(release, stay_ids=stay_ids)
    citations = list(
        dict.fromkeys(c for s in data_use.sources for c in (s.citations or []))
    )
    section = {
        **data_use.as_dict(),
        "access": ACCESS[DataUseTerms(data_use.terms)],
        "required_citations": citations,
    }
    run = getattr(release, "oracle_run", None)
    if run is not None:
        decision = egress_decision_for_run(run)
        section["oracle_run_egress"] = (
            decision.provenance() if decision is not None else None
        )
    return section


def data_use_markdown(section: dict) -> str:
    """The data card's "Data use" section, from the manifest's."""
    lines = [
        "## Data use",
        "",
        f"Terms: **{section['terms_label']}**. {section['access']}",
        "",
    ]
    for source in section.get("sources", []):
        agreement = source.get("agreement") or "-"
        if source.get("agreement_url"):
            agreement = f"[{agreement}]({source['agreement_url']})"
        lines.append(f"- {source['name']} ({source['terms']}): {agreement}")
    citations = section.get("required_citations") or []
    if citations:
        lines += ["", "Users of this release must cite:", ""]
        lines += [f"- {c}" for c in citations]
    egress = section.get("oracle_run_egress")
    if egress:
        where = {True: "on site", False: "a third party"}.get(
            egress.get("on_site"), "not classed: open data"
        )
        lines += [
            "",
            f"The Oracle run's contexts went to {egress.get('host') or 'no network'}"
            f" ({where}).",
        ]
        for a in egress.get("attestations") or []:
            lines.append(
                f"- Attested: {a['service']} at {a['host']} for {a['source']}: zero "
                "retention, no training, no human review; by "
                f"{a['attested_by']} on {a['attested_at'][:10]}, evidence "
                f"{a['evidence_url']}"
            )
    lines.append("")
    return "\n".join(lines)
