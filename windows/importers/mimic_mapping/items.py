"""What an itemid maps to (``ItemMapping``), and the expansion of the compact item
tables of the modules beside this one."""

from __future__ import annotations

from dataclasses import dataclass

from windows.models import EventKind

OBS = EventKind.OBSERVATION
ACT = EventKind.ACTION


@dataclass(frozen=True)
class ItemMapping:
    """Where one itemid goes: ``value = source value * factor + offset`` in ``unit``
    (an empty unit keeps the source's unit, unless ``no_unit``: CLIF gives the
    category none, as for pH and INR). ``delivery`` says, for medications,
    whether CLIF records them as continuous, intermittent or both (by the row)."""

    domain: str
    category: str = ""
    kind: str = OBS
    unit: str = ""
    factor: float = 1.0
    offset: float = 0.0
    delivery: str = ""
    no_unit: bool = False


def _items(domain: str, kind: str, table: dict) -> dict[int, ItemMapping]:
    """Expand ``{itemid: category | (category, unit[, factor[, offset]])}``; a unit
    of None means the CLIF category has no unit."""
    out = {}
    for itemid, spec in table.items():
        if isinstance(spec, str):
            spec = (spec,)
        unit = spec[1] if len(spec) > 1 else ""
        out[itemid] = ItemMapping(
            domain, spec[0], kind, unit or "", *spec[2:], no_unit=unit is None
        )
    return out
