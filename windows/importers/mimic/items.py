"""ICU and lab items: their labels from d_items / d_labitems, their CLIF mapping
(mimic_mapping) per event row, and the items the mapping does not know."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.importers.base import ImportSummary
from windows.importers.mimic.reading import D_ITEMS, D_LABITEMS, MimicFolder, _Columns
from windows.importers.mimic_mapping import items_frame


def _optional_read(
    folder: MimicFolder, table, summary: ImportSummary, instead: str
) -> _Columns | None:
    """An optional dictionary table's columns; None where the folder lacks it,
    with a note on the summary saying what is done ``instead``."""
    raw, file = folder.read(table)
    if raw is None:
        summary.notes.append(f"{table.display} not found: {instead}")
        return None
    return _Columns(raw, file)


class ItemLabels:
    """Item labels from d_items / d_labitems, for event names."""

    def __init__(self, folder: MimicFolder, summary: ImportSummary) -> None:
        self.chart = pd.Series(dtype=object)
        self.lab = pd.Series(dtype=object)
        self.unmapped = Unmapped()
        self.text_items = np.array([], dtype="int64")
        col = _optional_read(folder, D_ITEMS, summary, "ICU items are named by itemid")
        if col is not None:
            self.chart = self._unique(col.text("label"), col.id("itemid"))
            # Scored text items (GCS, RASS) carry both a score and a text worth
            # keeping ("No Response-ETT").
            param = col.text("param_type")
            self.text_items = col.id("itemid")[
                (param != "") & (param != "Numeric")
            ].to_numpy()
        col = _optional_read(folder, D_LABITEMS, summary, "labs are named by itemid")
        if col is not None:
            label, fluid = col.text("label"), col.text("fluid")
            other = (fluid != "") & (fluid != "Blood")
            label = label.where(~other, label + " (" + fluid + ")")
            self.lab = self._unique(label, col.id("itemid"))

    @staticmethod
    def _unique(labels: pd.Series, itemids: pd.Series) -> pd.Series:
        out = pd.Series(labels.to_numpy(), index=itemids.to_numpy())
        return out[~out.index.duplicated()]

    @staticmethod
    def name(itemid: pd.Series, labels: pd.Series) -> pd.Series:
        """Each row's item label; an item without one is named "itemid N"."""
        pos = labels.index.get_indexer(itemid.to_numpy())
        name = np.append(labels.to_numpy(dtype=object), "")[
            np.where(pos < 0, len(labels), pos)
        ]
        missing = name == ""
        if missing.any():
            name[missing] = ("itemid " + itemid[missing].astype(str)).to_numpy()
        return pd.Series(name, index=itemid.index)


def _mapped(
    table: str,
    itemid: pd.Series,
    labels: pd.Series,
    *,
    domain: str,
    kind: str,
    unmapped: Unmapped | None = None,
    rows: np.ndarray | None = None,
) -> pd.DataFrame:
    """The mapping of each row's itemid (mimic_mapping) and its label as name;
    unmapped items get the given domain and kind and an empty category, and are
    counted in ``unmapped`` (``rows``: rows per itemid, default one)."""
    items = items_frame(table)
    pos = items.index.get_indexer(itemid.to_numpy())
    if unmapped is not None and (pos < 0).any():
        unknown = pos < 0
        counts = np.ones(len(pos), dtype="int64") if rows is None else rows
        unmapped.add(table, itemid.to_numpy()[unknown], counts[unknown], labels)
    pos = np.where(pos < 0, len(items), pos)
    defaults = {
        "domain": domain,
        "category": "",
        "kind": kind,
        "unit": "",
        "factor": 1.0,
        "offset": 0.0,
        "delivery": "",
        "no_unit": False,
    }
    out = pd.DataFrame(
        {c: np.append(items[c].to_numpy(), d)[pos] for c, d in defaults.items()},
        index=itemid.index,
    )
    out["name"] = ItemLabels.name(itemid, labels)
    return out


def _unit(m: pd.DataFrame, source: pd.Series) -> pd.Series:
    """Each row's unit: the mapping's, else the source's; none where CLIF has none."""
    unit = m["unit"].where(m["unit"] != "", source)
    return unit.where(~m["no_unit"].astype(bool), "")


class Unmapped:
    """Rows of itemids the mapping does not know, per file, for the summary."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, int]] = {}
        self.names: dict[int, str] = {}

    def add(self, table: str, itemids, counts, labels: pd.Series) -> None:
        per_table = self.rows.setdefault(table, {})
        for itemid, n in zip(itemids, counts):
            itemid = int(itemid)
            per_table[itemid] = per_table.get(itemid, 0) + int(n)
            if itemid not in self.names:
                self.names[itemid] = str(labels.get(itemid, "")) if len(labels) else ""

    def notes(self, shown: int = 20) -> list[str]:
        out = []
        for table, counts in sorted(self.rows.items()):
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            listed = ", ".join(
                f"{itemid} {self.names.get(itemid) or '(no label)'} ({n:,} rows)"
                for itemid, n in ranked[:shown]
            )
            more = f", and {len(ranked) - shown} more" if len(ranked) > shown else ""
            out.append(
                f"{table}: {sum(counts.values()):,} rows of {len(ranked)} unknown "
                f"itemids (not in the mapping) imported under their label without a "
                f"CLIF category: {listed}{more}"
            )
        return out
