"""The rules of the domains whose actions are changes of a state
(windows.actions): a respiratory device, mode or setting, a CRRT start, mode
or prescription, proning and its end, a code status. Each returns the kind and
the state before it of every row."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from windows.models import EventKind

if TYPE_CHECKING:
    import pandas as pd

# CLIF respiratory_support device categories (mCIDE); another category in the
# domain that is neither a setting, a measurement nor a mode is no device.
DEVICE_CATEGORIES = frozenset(
    {
        "imv",
        "nippv",
        "cpap",
        "high flow nc",
        "face mask",
        "trach collar",
        "nasal cannula",
        "room air",
        "other",
    }
)
CRRT_SETTINGS = (
    "blood_flow_rate",
    "pre_filter_replacement_fluid_rate",
    "post_filter_replacement_fluid_rate",
    "dialysate_flow_rate",
)
# CRRT charted again after this silence is a new start. The CLIF demo's
# circuits are charted hourly; its silences on a running circuit (same mode and
# prescription on both sides) last 7-10 h, its pauses 21 h to 10 days.
CRRT_RESTART_HOURS = 12.0
_ACT, _OBS = EventKind.ACTION.value, EventKind.OBSERVATION.value


def isnan(value) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def number_text(value: float) -> str:
    """A charted number as charted: 12000, 0.4, 0.3977 (4 significant digits)."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e9:
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _state_changes(rows: pd.DataFrame, *, item, state, first_counts=None):
    """Kind and previous state per row: an action where the item's state differs
    from its previous charting in the admission (first chartings count unless
    ``first_counts`` says otherwise)."""
    kinds, prevs = [], []
    last: dict[tuple, object] = {}
    for key, value in zip(zip(rows["admission_id"].to_numpy(), item), state):
        if value is None:
            kinds.append(_OBS)
            prevs.append("")
            continue
        before = last.get(key)
        last[key] = value
        if before is None:
            first = first_counts(value) if first_counts else True
            kinds.append(_ACT if first else _OBS)
            prevs.append("")
        elif _differs(before, value):
            kinds.append(_ACT)
            prevs.append(
                number_text(before) if isinstance(before, float) else str(before)
            )
        else:
            kinds.append(_OBS)
            prevs.append("")
    return np.asarray(kinds, dtype=object), np.asarray(prevs, dtype=object)


def _differs(before, value) -> bool:
    if isinstance(before, float) and isinstance(value, float):
        return not _same(before, value)
    return before != value


def respiratory_kinds(rows: pd.DataFrame):
    import pandas as pd

    category = rows["category"].str.strip()
    lower = category.str.lower()
    is_set = lower.str.endswith("_set").to_numpy()
    is_mode = lower.str.startswith("mode:").to_numpy()
    is_device = lower.isin(DEVICE_CATEGORIES).to_numpy()
    values = rows["value_num"].to_numpy(dtype=float)
    names = (
        rows["name"].fillna("").astype(str).str.strip()
        if "name" in rows
        else pd.Series("", index=rows.index)
    )
    item = np.where(is_set, lower.to_numpy(), np.where(is_mode, "mode", "device"))
    state = []
    for value, setting, mode, device, cat, name in zip(
        values, is_set, is_mode, is_device, category.to_numpy(), names.to_numpy()
    ):
        if setting:
            state.append(None if np.isnan(value) else float(value))
        elif mode:
            state.append(cat.split(":", 1)[1] or name or None)
        elif device:
            state.append(cat)
        else:
            state.append(None)
    return _state_changes(
        rows,
        item=item,
        state=state,
        first_counts=lambda v: (
            not (isinstance(v, str) and v.lower() in ("room air", "standby"))
        ),
    )


def crrt_kinds(rows: pd.DataFrame):
    import pandas as pd

    category = rows["category"].str.strip().str.lower().to_numpy()
    values = rows["value_num"].to_numpy(dtype=float)
    times = pd.to_datetime(rows["time"], utc=True).to_numpy()
    admissions = rows["admission_id"].to_numpy()
    restart = np.timedelta64(int(CRRT_RESTART_HOURS * 3600), "s")
    kinds = np.full(len(rows), _OBS, dtype=object)
    prevs = np.full(len(rows), "", dtype=object)
    # Episodes: an admission's chartings split where the circuit was silent
    # longer than CRRT_RESTART_HOURS (rows come sorted by admission and time).
    new = (
        np.r_[True, (admissions[1:] != admissions[:-1])]
        | np.r_[True, (times[1:] - times[:-1]) > restart]
    )
    episode = np.cumsum(new)
    is_mode = np.array([c.startswith("crrt:") and len(c) > 5 for c in category])
    is_setting = np.isin(category, CRRT_SETTINGS) & ~np.isnan(values)
    for ep in np.unique(episode):
        at = np.flatnonzero(episode == ep)
        modes = at[is_mode[at]]
        if len(modes):
            mode = category[modes[0]].split(":", 1)[1]
            kinds[modes[0]] = _ACT  # the start
            for i in modes[1:]:
                current = category[i].split(":", 1)[1]
                if current != mode:
                    kinds[i], prevs[i] = _ACT, mode
                mode = current
        settings = at[is_setting[at]]
        if not len(modes) and len(settings):
            kinds[settings[0]] = _ACT  # a start charted without its mode
        last: dict[str, float] = {}
        for i in settings:
            before = last.get(category[i])
            last[category[i]] = float(values[i])
            if before is not None and not _same(before, float(values[i])):
                kinds[i], prevs[i] = _ACT, number_text(before)
    return kinds, prevs


def position_kinds(rows: pd.DataFrame):
    category = rows["category"].str.strip().str.lower().to_numpy()
    kinds, prevs = [], []
    last: dict[int, str] = {}
    for adm, cat in zip(rows["admission_id"].to_numpy(), category):
        if not cat:
            kinds.append(_OBS)
            prevs.append("")
            continue
        before = last.get(adm)
        last[adm] = cat
        turned = before != cat and "prone" in (before, cat)
        kinds.append(_ACT if turned else _OBS)
        prevs.append(before if turned and before else "")
    return np.asarray(kinds, dtype=object), np.asarray(prevs, dtype=object)


def code_status_kinds(rows: pd.DataFrame):
    category = rows["category"].str.strip().to_numpy()
    state = [c or None for c in category]
    return _state_changes(
        rows, item=np.full(len(rows), "code"), state=state, first_counts=_never
    )


def _never(_value) -> bool:
    return False
