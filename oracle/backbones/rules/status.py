"""The patient status of a window (improving, stable, deteriorating) from the
trends of its tracks, "now" against "before"."""

from __future__ import annotations

from oracle.backbones.rules.thresholds import (
    FIO2_STEP,
    GCS_STEP,
    LACTATE_CLEARANCE,
    LACTATE_HIGH,
    LACTATE_RISE,
    MAP_PROFOUND,
    MAP_TARGET,
    NED_RISE_RATIO,
    NED_STEP,
    NED_WEAN_RATIO,
    PF_CHANGE,
    PF_CUTOFF,
    SOFA_STEP,
)
from oracle.backbones.rules.window import _Window
from windows.concepts.respiratory import STATUSES as VENTILATION_STATUSES


def _ned_trend(f: _Window) -> int:
    """+1 when the norepinephrine-equivalent dose rose (NED_STEP and
    NED_RISE_RATIO), -1 when it was weaned (NED_STEP and NED_WEAN_RATIO, or
    stopped), 0 otherwise or unknown. Last dose of "now" against the last of
    "before": the state at the end of each span."""
    change = f.change("ned", "last")
    if change is None:
        return 0
    now, before = change
    if now - before >= NED_STEP and now >= NED_RISE_RATIO * before:
        return 1
    if before > 0 and (
        now == 0 or (before - now >= NED_STEP and now <= NED_WEAN_RATIO * before)
    ):
        return -1
    return 0


def _status(f: _Window) -> tuple[str, list[int]]:
    """Patient status from trends over hours, "now" against "before" (spec
    section 3: relative to the recent context).

    Signs, with their weights; the weighted net decides, a tie is stable:

    - SOFA (24-h worst) rose or fell by SOFA_STEP or more: 2 (Sepsis-3);
    - norepinephrine-equivalent dose rose or was weaned (_ned_trend): 2;
    - ventilation support escalated or de-escalated (6b ranks: none <
      supplemental O2 < HFNC < NIV < invasive): 2;
    - lactate rose by LACTATE_RISE to LACTATE_HIGH or more, or cleared by
      LACTATE_CLEARANCE: 1;
    - oxygenation: FiO2 up or down by FIO2_STEP, or P/F fell or rose by a
      fifth across PF_CUTOFF: 1 each;
    - sustained hypotension began or resolved (MAP_TARGET): 1;
    - GCS fell or rose by GCS_STEP: 1; KDIGO stage rose: 1 (a falling stage is
      the baseline window moving, not renal recovery).

    Overrides, in this order:

    - sustained hypotension on a rising vasopressor dose is deteriorating
      (escalating support that does not restore MAP), and so is profound
      hypotension (MAP_PROFOUND);
    - never improving while hypotension persists;
    - in the final hours before death (DEATH_GUARD_HOURS) never improving,
      and vasopressor or ventilation weaning there is not counted as better.
    """
    worse: list[tuple[int, tuple]] = []
    better: list[tuple[int, tuple]] = []
    dying = f.final_hours_before_death()
    hypotension = f.hypotension()

    def sign(worse_now: bool, better_now: bool, weight: int, keys: tuple) -> None:
        if worse_now:
            worse.append((weight, keys))
        elif better_now:
            better.append((weight, keys))

    def stepped(column, how, step, weight, keys, worse_when: int = 1) -> None:
        """A track that moved by ``step`` or more: worse moving one way
        (``worse_when`` +1 a rise, -1 a fall), better the other."""
        if change := f.change(column, how):
            moved = (change[0] - change[1]) * worse_when
            sign(moved >= step, -moved >= step, weight, keys)

    sofa_keys = ("creatinine", "platelets", "map", "vasopressors", "gcs")
    stepped("sofa", "max", SOFA_STEP, 2, sofa_keys)
    ned_trend = _ned_trend(f)
    sign(ned_trend > 0, ned_trend < 0 and not dying, 2, ("vasopressors", "map"))
    if vent := f.change("ventilation", "max"):
        vent_now, vent_before = vent
        rank = VENTILATION_STATUSES.index
        sign(
            rank(vent_now) > rank(vent_before),
            rank(vent_now) < rank(vent_before) and not dying,
            2,
            ("ventilation",),
        )
    if lactate := f.change("lactate", "last"):
        lac_now, lac_before = lactate
        sign(
            lac_now >= LACTATE_HIGH and lac_now - lac_before >= LACTATE_RISE,
            lac_before >= LACTATE_HIGH
            and lac_now <= (1 - LACTATE_CLEARANCE) * lac_before,
            1,
            ("lactate",),
        )
    stepped("fio2", "max", FIO2_STEP, 1, ("fio2",))
    pf = f.change("pf_ratio", "min")
    if pf and pf[1] > 0:
        pf_now, pf_before = pf
        sign(
            pf_now < PF_CUTOFF and pf_now <= (1 - PF_CHANGE) * pf_before,
            pf_before < PF_CUTOFF and pf_now >= (1 + PF_CHANGE) * pf_before,
            1,
            ("pf_ratio",),
        )
    map_before = f.value("map", "mean", when="before")
    if map_before is not None:
        before_low = map_before < MAP_TARGET
        map_now = f.value("map", "last")
        sign(
            hypotension and not before_low,
            before_low and map_now is not None and map_now >= MAP_TARGET,
            1,
            ("map",),
        )
    stepped("gcs", "min", GCS_STEP, 1, ("gcs",), worse_when=-1)
    if aki := f.change("aki_stage", "max"):
        aki_now, aki_before = aki
        sign(aki_now > aki_before, False, 1, ("creatinine", "urine", "crrt"))

    net = sum(w for w, _ in worse) - sum(w for w, _ in better)
    status = "deteriorating" if net > 0 else "improving" if net < 0 else "stable"
    drivers = worse if net > 0 else better if net < 0 else []
    if status != "deteriorating":
        if hypotension and ned_trend > 0:
            status, drivers = "deteriorating", [(2, ("map", "vasopressors"))]
        elif f.hypotension(below=MAP_PROFOUND):
            status, drivers = "deteriorating", [(2, ("map",))]
    if status == "improving" and (hypotension or dying):
        status, drivers = "stable", []
    ids: list[int] = []
    for _, keys in sorted(drivers, key=lambda d: -d[0]):
        for pk in f.cite(*keys, limit=1):
            if pk not in ids:
                ids.append(pk)
    if not ids:
        ids = f.cite("map", "hr", "spo2", limit=1) or f.nearest()
    return status, ids[:5]
