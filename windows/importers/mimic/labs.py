"""labevents and microbiologyevents: lab results at their result time, the
specimen of each blood-gas result, and cultures as draw and result."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from django.db import connection

from windows.importers.mimic.events import OBS, EventStep, _events
from windows.importers.mimic.items import ItemLabels, _mapped, _unit
from windows.importers.mimic.reading import _Columns, _keys
from windows.models import Domain, Event


def _labevents(labels: ItemLabels) -> Callable:
    def transform(f: pd.DataFrame, file: str) -> pd.DataFrame:
        """Time: storetime when present, else charttime: a lab enters the
        trajectory when its result is available, as CLIF's lab_result_dttm. A
        blood-gas result keeps its collection time in end_time until
        ``_gas_specimens`` has read its specimen."""
        col = _Columns(f, file, f["_row"].to_numpy())
        itemid, valuenum = col.id("itemid"), col.number("valuenum")
        m = _mapped(
            "labevents",
            itemid,
            labels.lab,
            domain=Domain.LABS.value,
            kind=OBS,
            unmapped=labels.unmapped,
        )
        collected = col.time("charttime", required=True)
        return _events(
            f,
            "labevents",
            time=col.time("storetime").fillna(collected),
            end_time=collected.where(_gas(m["category"]), pd.NaT),
            kind=m["kind"],
            domain=m["domain"],
            category=m["category"],
            name=m["name"],
            value_num=valuenum * m["factor"] + m["offset"],
            unit=_unit(m, col.text("valueuom")),
            value_text=col.text("value").where(valuenum.isna(), ""),
            source_key=_keys(f["labevent_id"]),
        )

    return transform


def _gas(category: pd.Series) -> pd.Series:
    """Blood-gas results (CLIF *_arterial and *_venous categories) and the blood
    gas's Specimen Type (52033): their specimen is read per collection."""
    # Judged once per distinct category, not once per row: a file has a few
    # hundred categories and hundreds of thousands of rows.
    codes, uniques = pd.factorize(category)
    texts = [str(u) for u in uniques]
    gas = [t.endswith(("_arterial", "_venous")) or t == "specimen_type" for t in texts]
    # A missing category (code -1) is no gas.
    return pd.Series(np.array([*gas, False], dtype=bool)[codes], index=category.index)


# Specimen Type (52033) values -> specimen.
_SPECIMEN_TYPES = {
    "ART.": "arterial",
    "VEN.": "venous",
    "MIX.": "venous",
    "CENTRAL VENOUS": "venous",
}


def _gas_specimens(admission_ids: list[int]) -> None:
    """Each numeric blood-gas result's specimen in its value_text, as the CLIF
    importer keeps it (windows.importers.clif.transforms._labs; a venous pO2 gives
    no P/F, CLINICAL_CONCEPTS.md section 7): the Specimen Type charted with the same
    collection, else "venous" where its category or name says venous and
    "arterial" where its name says arterial, else what the collection's other
    results say when they say one only; '' is unknown. A collection is the
    admission's results collected at the same time, from labevents and
    chartevents alike; the transforms left its time in end_time, cleared here."""
    from windows.tracks import event_rows

    rows = event_rows(
        Event.objects.filter(
            admission_id__in=admission_ids,
            source_table__in=["labevents", "chartevents"],
            domain=Domain.LABS.value,
            end_time__isnull=False,
        ),
        [
            "id",
            "admission_id",
            "category",
            "name",
            "value_num",
            "value_text",
            "end_time",
        ],
    ).rename(
        columns={
            "admission_id": "admission",
            "value_text": "text",
            "end_time": "collected",
        }
    )
    if rows.empty:
        return
    key = [rows["admission"], rows["collected"]]
    typed = rows["text"].where(rows["category"] == "specimen_type", "").str.strip()
    typed = typed.str.upper().map(_SPECIMEN_TYPES).fillna("")
    venous = rows["category"].str.endswith("_venous") | rows["name"].str.contains(
        "venous", case=False
    )
    arterial = rows["name"].str.contains(r"\barterial\b", case=False) & ~venous
    own = pd.Series(
        np.select([venous, arterial], ["venous", "arterial"], ""), index=rows.index
    ).where(rows["category"] != "specimen_type", "")

    def one_of(values: pd.Series) -> pd.Series:
        has_v = (values == "venous").groupby(key).transform("any")
        has_a = (values == "arterial").groupby(key).transform("any")
        return pd.Series(
            np.select([has_v & ~has_a, has_a & ~has_v], ["venous", "arterial"], ""),
            index=rows.index,
        )

    source, shared = one_of(typed), one_of(own)
    specimen = source.where(source != "", own.where(own != "", shared))
    numeric = rows["value_num"].notna()
    # A numeric result gets its specimen; every row loses the collection time.
    text = rows["text"].where(~numeric, specimen).fillna("").astype(str)
    _specimens_write(rows["id"].astype("int64").tolist(), text.tolist())


def _specimens_write(ids: list[int], texts: list[str]) -> None:
    """Set value_text and clear end_time of the events ``ids``: one statement
    with array parameters on PostgreSQL (an ORM update per 5,000 ids compiled
    and sent IN lists of thousands of placeholders)."""
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {table} AS e SET value_text = v.text, end_time = NULL "
                f"FROM unnest(%s::bigint[], %s::text[]) AS v(id, text) "
                f"WHERE e.id = v.id",
                [ids, texts],
            )
        else:
            cursor.executemany(
                f"UPDATE {table} SET value_text = %s, end_time = NULL WHERE id = %s",
                list(zip(texts, ids)),
            )


class LabEventsStep(EventStep):
    """labevents; then, with chartevents' blood gases written too, the specimen
    of each blood-gas result (``_gas_specimens``)."""

    def run(self, batch, writer, progress, summary) -> None:
        super().run(batch, writer, progress, summary)
        writer.flush()
        _gas_specimens([int(a) for a in batch.admission_ids])


def _microbiologyevents(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """A culture as two records, so that nothing is known before it was known.

    The draw: a microbiology record at the specimen's time (charttime, else
    chartdate), which CLINICAL_CONCEPTS.md section 10b pairs antibiotics with
    (CLIF's collect_dttm), one per specimen (micro_specimen_id, else per row),
    with the result time as its end and no result in it. The result: one per
    row at the time it was known (storetime, else storedate; not before the
    specimen; CLIF's result_dttm), the organism (or "no growth") and, for a
    susceptibility row, the antibiotic and its interpretation. Results are
    ``labs`` records of category ``culture_result`` so that the concepts,
    which count every microbiology record as a culture drawn, do not take a
    result time for a draw.
    """
    col = _Columns(f, file, f["_row"].to_numpy())
    taken = col.time("charttime").fillna(col.time("chartdate", required=True))
    stored = col.time("storetime").fillna(col.time("storedate"))
    result = stored.where(stored.isna() | (stored >= taken), taken)
    organism = col.text("org_name")
    organism = organism.where(organism != "", "no growth")
    antibiotic = col.text("ab_name")
    susceptibility = (": " + antibiotic + " " + col.text("interpretation")).str.rstrip()
    specimen, test = col.text("spec_type_desc"), col.text("test_name")
    name = test.where(test != "", specimen)
    keys = _keys(f["microevent_id"])
    specimen_id = _keys(f["micro_specimen_id"]) if "micro_specimen_id" in f else keys
    draw = (
        ~pd.DataFrame(
            {
                "a": f["admission_id"].to_numpy(),
                "s": specimen_id.where(specimen_id != "", keys).to_numpy(),
            }
        ).duplicated()
    ).to_numpy()
    drawn = _events(
        f.loc[draw],
        "microbiologyevents",
        time=taken[draw],
        end_time=result[draw].fillna(taken[draw]),
        kind=OBS,
        domain=Domain.MICROBIOLOGY.value,
        category=specimen[draw].str.lower(),
        name=name[draw],
        value_text="culture drawn",
        source_key="specimen:" + specimen_id.where(specimen_id != "", keys)[draw],
    )
    results = _events(
        f,
        "microbiologyevents",
        time=result.fillna(taken),
        kind=OBS,
        domain=Domain.LABS.value,
        category="culture_result",
        name=name,
        value_text=organism + susceptibility.where(antibiotic != "", ""),
        source_key=keys,
    )
    return pd.concat([drawn, results], ignore_index=True)
