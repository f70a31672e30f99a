"""The mapping of each source table, and its frame for vectorized lookups."""

from __future__ import annotations

from functools import cache

import pandas as pd

from windows.importers.mimic_mapping.chartevents import CHARTEVENTS
from windows.importers.mimic_mapping.inputevents import INPUTEVENTS
from windows.importers.mimic_mapping.items import ItemMapping
from windows.importers.mimic_mapping.labevents import LABEVENTS
from windows.importers.mimic_mapping.outputs_procedures import (
    DATETIMEEVENTS,
    OUTPUTEVENTS,
    PROCEDUREEVENTS,
)

ITEM_TABLES: dict[str, dict[int, ItemMapping]] = {
    "chartevents": CHARTEVENTS,
    "labevents": LABEVENTS,
    "inputevents": INPUTEVENTS,
    "outputevents": OUTPUTEVENTS,
    "procedureevents": PROCEDUREEVENTS,
    "datetimeevents": DATETIMEEVENTS,
}


@cache
def items_frame(table: str) -> pd.DataFrame:
    """The mapping of one source table as a frame indexed by itemid, for
    vectorized lookups: domain, category, kind, unit, factor, offset, delivery."""
    items = ITEM_TABLES[table]
    frame = pd.DataFrame(
        [vars(m) for m in items.values()], index=pd.Index(list(items), name="itemid")
    )
    frame["domain"] = frame["domain"].map(str)
    frame["kind"] = frame["kind"].map(str)
    return frame.astype({"factor": "float64", "offset": "float64"})
