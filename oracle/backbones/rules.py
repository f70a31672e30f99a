"""The rules backbone ("rules", model "rules-v1"): the offline default Oracle.
It labels a window deterministically from the stay's hourly concept tracks
(windows.concepts, definitions in /work/shared/CLINICAL_CONCEPTS.md, columns in
windows.concepts.columns) and the events of its context, with no LLM and no
database access. Each rule below cites the definition it applies.

What it reads, per window (hours since ICU admission; track row H holds the
hour (H - 1, H]):

- "now": the rows of the window and the two hours before it, (start - 2, ceil(end)];
- "before": the six hours before that, (start - 8, start - 2], the recent
  context the status is judged against (spec section 3);
- for problems that last longer than a few hours (AKI), the rows of the
  preceding ``AKI_RECOVERY_HOURS``;
- the stay's static facts: the Oracle is a hindsight labeller (spec section 7)
  and its context carries the hospital outcome and the stay's length.

Evidence is the ids of the context's events that drive each finding, those
nearest the window first.
"""

from __future__ import annotations

import json
import math
import time
from typing import Callable

import numpy as np

from annotation.critical import ANTICOAGULANTS, DEFAULT_CRITICAL_ACTION_RULES
from oracle.backbones.base import BackboneResult, WindowContext
from oracle.schema import payload_validate
from windows.concepts.respiratory import STATUSES as VENTILATION_STATUSES
from windows.concepts.sepsis import ANTIBIOTICS
from windows.models import Outcome

MODEL = "rules-v1"
VASOPRESSORS = ("norepinephrine", "epinephrine", "vasopressin", "phenylephrine", "dopamine")
INOTROPES = ("dobutamine", "milrinone")
_RULE_CATEGORIES = {r["key"]: set(r["categories"]) for r in DEFAULT_CRITICAL_ACTION_RULES}
FLUID_BOLUS = _RULE_CATEGORIES["fluid_boluses"]
MED_DOMAINS = ("medication_admin_continuous", "medication_admin_intermittent")

# Spans of the tracks read around a window (see the module docstring), hours.
NOW_LEAD_HOURS = 2.0
BEFORE_HOURS = 6.0

# MAP target of the Surviving Sepsis Campaign 2021 (Evans et al., Crit Care Med
# 2021): 65 mmHg. Hypotension is *sustained* when the hourly mean MAP (the
# "map" track, mean of the hour's chartings) is below it in the latest hour with
# a value and in at least two hours of "now": one low reading (a flushed
# arterial line, a cuff) moves the hour's minimum, not two hourly means.
MAP_TARGET = 65.0
SUSTAINED_HOURS = 2
# Profound hypotension: a sustained hourly mean MAP below 50 mmHg, under the
# lower limit of cerebral autoregulation (Lassen, Physiol Rev 1959) and of renal
# autoregulation; whatever the trend, a patient there is deteriorating.
MAP_PROFOUND = 50.0
# Shock on vasopressors: a norepinephrine-equivalent dose (CLINICAL_CONCEPTS.md
# 5, Goradia et al. 2020) above 0.1 mcg/kg/min, the dose at which SOFA scores
# cardiovascular failure 4 (norepinephrine or epinephrine > 0.1 mcg/kg/min,
# Vincent et al. 1996; CLINICAL_CONCEPTS.md 9b). Lower doses are named as
# low-dose support, and only beside hypotension or hyperlactatemia.
SHOCK_NED_MIN = 0.1
# SSC 2021: add vasopressin rather than escalating norepinephrine further once
# norepinephrine is 0.25-0.5 mcg/kg/min.
VASOPRESSIN_ADD_NE = 0.25
# A vasopressor dose trend: a change of at least 0.05 mcg/kg/min of
# norepinephrine equivalent and at least a quarter of the earlier dose (half of
# it when weaning), so that a pump's rounding or a bag change is not a trend.
NED_STEP = 0.05
NED_RISE_RATIO = 1.25
NED_WEAN_RATIO = 0.5
# Acute organ dysfunction in Sepsis-3 (Singer et al., JAMA 2016): a SOFA rise
# of 2 points or more (SOFA is the 24-h worst score, CLINICAL_CONCEPTS.md 9c).
SOFA_STEP = 2
# Lactate: a rise of 1 mmol/L to at least 2 mmol/L (the Sepsis-3 hyperlactatemia
# cut-off) is worse; a fall of at least 20 % from 2 mmol/L or more is lactate
# clearance (SSC 2021 guides resuscitation by falling lactate; 10-20 % clearance
# goals, Jansen et al. 2010, Nguyen et al. 2004).
LACTATE_HIGH = 2.0
LACTATE_RISE = 1.0
LACTATE_CLEARANCE = 0.2
# Oxygenation: FiO2 changed by 0.2 or more, or P/F by a fifth or more across
# the Berlin ARDS cut-off of 300 mmHg (ARDS Definition Task Force, JAMA 2012).
FIO2_STEP = 0.2
PF_CUTOFF = 300.0
PF_CHANGE = 0.2
GCS_STEP = 3
# AKI lasts as long as its definition: KDIGO stages an AKI episode by its worst
# stage (KDIGO 2012, CLINICAL_CONCEPTS.md 4) and ADQI 16 (Chawla et al., Nat
# Rev Nephrol 2017) calls AKI reversed only after 48 h without its criteria, so
# the problem's stage is the worst KDIGO stage of the last 48 h; while CRRT
# runs it is stage 3 (4d).
AKI_RECOVERY_HOURS = 48.0
# Antimicrobials count as given when one was given within the last 24 h (the
# longest usual dosing interval).
ANTIBIOTIC_LOOKBACK_HOURS = 24.0
# The final hours of the ICU stay of a patient who died in hospital: never
# "improving", and weaning of vasopressors or of ventilatory support there is
# not read as improvement (it is, in the main, withdrawal of life-sustaining
# treatment). The context gives the outcome and the stay's length, not the time
# of death; in the CLIF demo 13 of the 22 in-hospital deaths happen during the
# ICU stay, 1 to 5 h before its recorded end.
DEATH_GUARD_HOURS = 12.0
# Which events stand behind each concept track (CLIF categories, or a domain).
EVIDENCE = {
    "map": {"categories": {"map", "sbp"}},
    "hr": {"categories": {"heart_rate"}},
    "spo2": {"categories": {"spo2"}},
    "temp": {"categories": {"temp_c"}},
    "gcs": {"categories": {"gcs_total"}},
    "lactate": {"categories": {"lactate"}},
    "ph": {"categories": {"ph_arterial", "pco2_arterial", "bicarbonate"}},
    "creatinine": {"categories": {"creatinine"}},
    "platelets": {"categories": {"platelet_count"}},
    "bilirubin": {"categories": {"bilirubin_total"}},
    "inr": {"categories": {"inr"}},
    "fio2": {"categories": {"fio2_set"}},
    "pf_ratio": {"categories": {"po2_arterial", "fio2_set"}},
    "vasopressors": {"categories": set(VASOPRESSORS), "domains": set(MED_DOMAINS)},
    "inotropes": {"categories": set(INOTROPES), "domains": set(MED_DOMAINS)},
    "ventilation": {"domains": {"respiratory_support"}},
    "crrt": {"domains": {"crrt_therapy"}},
    "urine": {"domains": {"output"}},
    "antibiotic": {"categories": set(ANTIBIOTICS), "domains": set(MED_DOMAINS)},
}


def _num(value) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


class _Window:
    """The facts of one window: track values now and before, and its events by
    category, for the rules below."""

    def __init__(self, context: WindowContext):
        self.context = context
        self.start_h = context.hours_since_admit
        self.end_h = self.start_h + (context.end - context.start).total_seconds() / 3600
        self.last_h = max(math.ceil(self.end_h), math.floor(self.start_h) + 1)
        frame = context.tracks
        if frame is not None and len(frame):
            self.hours = frame.index.to_numpy(dtype=float)
            self.frame = frame
            self.now = self.rows(self.start_h - NOW_LEAD_HOURS, self.last_h)
            self.before = self.rows(
                self.start_h - NOW_LEAD_HOURS - BEFORE_HOURS,
                self.start_h - NOW_LEAD_HOURS,
            )
        else:
            self.hours = self.frame = self.now = self.before = None
        self.events = sorted(context.events, key=lambda e: (self._distance(e), -e["id"]))
        self.static = context.static or {}

    def rows(self, after_h: float, upto_h: float):
        """The track rows of hours ending in (after_h, upto_h]."""
        if self.frame is None:
            return None
        return self.frame[(self.hours > after_h) & (self.hours <= upto_h)]

    def _distance(self, event) -> float:
        h = event["hours"]
        if self.start_h <= h < self.end_h:
            return 0.0
        # Past events first at equal distance: the window is judged on what led to it.
        return min(abs(h - self.start_h), abs(h - self.end_h)) + (0.01 if h >= self.end_h else 0)

    @staticmethod
    def series(rows, column) -> list:
        if rows is None or column not in rows:
            return []
        return [v for v in rows[column].tolist() if v is not None and v == v]

    def numbers(self, column: str, rows=None) -> list[float]:
        rows = self.now if rows is None else rows
        return [n for n in (_num(v) for v in self.series(rows, column)) if n is not None]

    def value(self, column: str, how: str = "last", *, when: str = "now"):
        """A track over "now" or "before": last known, min, max or mean; None if
        unknown. Ventilation status: the last or the most supportive."""
        rows = self.now if when == "now" else self.before
        if column == "ventilation":
            ranked = [v for v in self.series(rows, column) if v in VENTILATION_STATUSES]
            if not ranked:
                return None
            return max(ranked, key=VENTILATION_STATUSES.index) if how == "max" else ranked[-1]
        numbers = self.numbers(column, rows)
        if not numbers:
            return None
        if how == "mean":
            return sum(numbers) / len(numbers)
        return {"last": numbers[-1], "min": min(numbers), "max": max(numbers)}[how]

    def worst_since(self, column: str, hours: float) -> float | None:
        """The highest value of a track over the ``hours`` before the window's end."""
        numbers = self.numbers(column, self.rows(self.last_h - hours, self.last_h))
        return max(numbers) if numbers else None

    def hypotension(self, below: float = MAP_TARGET) -> bool:
        """Sustained hypotension: the hourly mean MAP of "now" below ``below``
        in its latest known hour and in SUSTAINED_HOURS hours at least."""
        means = self.numbers("map")
        if not means or means[-1] >= below:
            return False
        return sum(m < below for m in means) >= SUSTAINED_HOURS

    def final_hours_before_death(self) -> bool:
        """The window lies in the last DEATH_GUARD_HOURS of the ICU stay of a
        patient who died in hospital (the hindsight facts of the context)."""
        stay_hours = _num(self.static.get("stay_hours"))
        if self.static.get("hospital_outcome") != Outcome.DIED or stay_hours is None:
            return False
        return stay_hours - self.end_h <= DEATH_GUARD_HOURS

    def cite(self, *keys: str, limit: int = 2) -> list[int]:
        """Ids of the events behind ``keys`` (EVIDENCE), nearest the window first."""
        out: list[int] = []
        for key in keys:
            spec = EVIDENCE[key]
            categories, domains = spec.get("categories"), spec.get("domains")
            found = 0
            for event in self.events:
                if categories is not None and event["category"] not in categories:
                    continue
                if domains is not None and event["domain"] not in domains:
                    continue
                if event["id"] not in out:
                    out.append(event["id"])
                    found += 1
                if found >= limit:
                    break
        return out

    def nearest(self, n: int = 1) -> list[int]:
        return [e["id"] for e in self.events[:n]]

    def evidence(self, *keys: str, limit: int = 2) -> list[int]:
        """cite(), or the events nearest the window when none of ``keys`` has any."""
        return self.cite(*keys, limit=limit) or self.nearest()

    def previous_rate(self, event) -> float | None:
        """The rate of the same drug charted just before ``event`` in the context."""
        earlier = [
            e
            for e in self.context.events
            if e["category"] == event["category"]
            and e["domain"] == event["domain"]
            and (e["hours"], e["id"]) < (event["hours"], event["id"])
        ]
        if not earlier:
            return None
        last = max(earlier, key=lambda e: (e["hours"], e["id"]))
        if str(last["text"]).lower() in {"stop", "stopped", "paused"}:
            return 0.0
        return _num(last["value"])


# --- status ---------------------------------------------------------------------


def _ned_trend(f: _Window) -> int:
    """+1 when the norepinephrine-equivalent dose rose (NED_STEP and
    NED_RISE_RATIO), -1 when it was weaned (NED_STEP and NED_WEAN_RATIO, or
    stopped), 0 otherwise or unknown. Last dose of "now" against the last of
    "before": the state at the end of each span."""
    now, before = f.value("ned", "last"), f.value("ned", "last", when="before")
    if now is None or before is None:
        return 0
    if now - before >= NED_STEP and now >= NED_RISE_RATIO * before:
        return 1
    if before > 0 and (now == 0 or (before - now >= NED_STEP and now <= NED_WEAN_RATIO * before)):
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

    sofa_now, sofa_before = f.value("sofa", "max"), f.value("sofa", "max", when="before")
    if sofa_now is not None and sofa_before is not None:
        sign(
            sofa_now - sofa_before >= SOFA_STEP,
            sofa_before - sofa_now >= SOFA_STEP,
            2,
            ("creatinine", "platelets", "map", "vasopressors", "gcs"),
        )
    ned_trend = _ned_trend(f)
    sign(ned_trend > 0, ned_trend < 0 and not dying, 2, ("vasopressors", "map"))
    vent_now = f.value("ventilation", "max")
    vent_before = f.value("ventilation", "max", when="before")
    if vent_now and vent_before:
        rank = VENTILATION_STATUSES.index
        sign(
            rank(vent_now) > rank(vent_before),
            rank(vent_now) < rank(vent_before) and not dying,
            2,
            ("ventilation",),
        )
    lac_now, lac_before = f.value("lactate", "last"), f.value("lactate", "last", when="before")
    if lac_now is not None and lac_before is not None:
        sign(
            lac_now >= LACTATE_HIGH and lac_now - lac_before >= LACTATE_RISE,
            lac_before >= LACTATE_HIGH and lac_now <= (1 - LACTATE_CLEARANCE) * lac_before,
            1,
            ("lactate",),
        )
    fio2_now, fio2_before = f.value("fio2", "max"), f.value("fio2", "max", when="before")
    if fio2_now is not None and fio2_before is not None:
        sign(
            fio2_now - fio2_before >= FIO2_STEP,
            fio2_before - fio2_now >= FIO2_STEP,
            1,
            ("fio2",),
        )
    pf_now, pf_before = f.value("pf_ratio", "min"), f.value("pf_ratio", "min", when="before")
    if pf_now is not None and pf_before is not None and pf_before > 0:
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
    gcs_now, gcs_before = f.value("gcs", "min"), f.value("gcs", "min", when="before")
    if gcs_now is not None and gcs_before is not None:
        sign(gcs_before - gcs_now >= GCS_STEP, gcs_now - gcs_before >= GCS_STEP, 1, ("gcs",))
    aki_now, aki_before = f.value("aki_stage", "max"), f.value("aki_stage", "max", when="before")
    if aki_now is not None and aki_before is not None:
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


# --- problems, actions, red flags -----------------------------------------------


def _fmt(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else str(round(value))


def _findings(f: _Window) -> dict:
    """What is true of the patient at the window, read once for the rules."""
    get = f.value
    septic_group = "sepsis" in str(f.static.get("disease_group", "")).lower()
    crrt = (get("crrt_active", "max") or 0) >= 1
    aki = max(
        (
            v
            for v in (
                f.worst_since("aki_stage", AKI_RECOVERY_HOURS),
                f.worst_since("aki_stage_smoothed", AKI_RECOVERY_HOURS),
            )
            if v is not None
        ),
        default=None,
    )
    if crrt:
        aki = 3.0
    antibiotics = f.worst_since("antibiotic", ANTIBIOTIC_LOOKBACK_HOURS)
    return {
        "aki": aki,
        "crrt": crrt,
        "creatinine": get("creatinine"),
        "ned": get("ned", "last"),
        "norepinephrine": get("norepinephrine", "last") or 0.0,
        "vasopressin": get("vasopressin", "last") or 0.0,
        "inotrope": max(get("dobutamine", "last") or 0.0, get("milrinone", "last") or 0.0),
        "map": get("map", "last"),
        "hypotension": f.hypotension(),
        "lactate": get("lactate"),
        "ph": get("ph"),
        "inr": get("inr"),
        "platelets": get("platelets"),
        "bilirubin": get("bilirubin"),
        "gcs": get("gcs", "min"),
        "temp": get("temp", "max"),
        "hr": get("hr", "max"),
        "spo2": get("spo2", "min"),
        "fio2": get("fio2", "max"),
        "pf": get("pf_ratio", "min"),
        "vent": get("ventilation", "max"),
        "infection": septic_group
        or (get("sepsis3", "max") or 0) >= 1
        or (get("suspected_infection", "max") or 0) >= 1,
        "sepsis3": (get("sepsis3", "max") or 0) >= 1,
        "antibiotic_recent": (antibiotics or 0) >= 1,
    }


def _problems(f: _Window, x: dict) -> list[dict]:
    """Acute problems from active findings, each as long as its definition:

    - AKI: the worst KDIGO stage of the last AKI_RECOVERY_HOURS (CLINICAL_CONCEPTS.md
      4; ADQI 16), stage 3 while on CRRT (4d);
    - shock on vasopressors: norepinephrine equivalent above SHOCK_NED_MIN (SOFA
      cardiovascular 4, 9b); septic when Sepsis-3 (10c), suspected infection
      (10b) or a sepsis diagnosis group; below it, low-dose vasopressor support
      is a problem only beside sustained hypotension or lactate >= 2 mmol/L;
    - hypotension: sustained (MAP_TARGET, hourly means), off vasopressors;
    - respiratory failure by ventilation status (6b) and P/F < 300 or FiO2 >= 0.5
      (7; Berlin 2012); hypoxemia SpO2 < 90 % without support;
    - hyperlactatemia lactate >= 2 mmol/L, severe >= 4 (Sepsis-3; spec 10);
      acidemia arterial pH < 7.30 (spec 10); coagulopathy INR >= 1.5 (spec 10)
      or platelets < 100 (SOFA coagulation 2); liver dysfunction bilirubin >= 2
      mg/dL (SOFA liver 2); depressed consciousness GCS <= 8 (spec 10); fever
      >= 38.3 °C (IDSA/SCCM fever in the ICU, 2008); tachycardia > 130/min.
    """
    out: list[dict] = []

    def add(text: str, ids: list[int]) -> None:
        out.append({"text": text, "evidence": ids})

    if x["aki"] is not None and x["aki"] >= 1:
        text = f"AKI KDIGO stage {int(x['aki'])}"
        if x["crrt"]:
            text += " on CRRT"
        if x["creatinine"] is not None:
            text += f" (creatinine {_fmt(x['creatinine'])} mg/dL)"
        add(text, f.evidence("creatinine", "crrt", "urine"))
    ned = x["ned"] or 0.0
    lactate_high = x["lactate"] is not None and x["lactate"] >= LACTATE_HIGH
    if ned > SHOCK_NED_MIN:
        kind = "septic shock" if x["infection"] else "shock"
        text = f"{kind} on vasopressors (norepinephrine equivalent {_fmt(ned, 2)} mcg/kg/min)"
        add(text, f.evidence("vasopressors", "map", "lactate"))
    elif ned > 0 and (x["hypotension"] or lactate_high):
        why = f"MAP {_fmt(x['map'], 0)} mmHg" if x["hypotension"] else (
            f"lactate {_fmt(x['lactate'])} mmol/L"
        )
        add(
            f"circulatory failure on low-dose vasopressors (norepinephrine equivalent "
            f"{_fmt(ned, 2)} mcg/kg/min, {why})",
            f.evidence("vasopressors", "map", "lactate"),
        )
    elif ned <= 0 and x["inotrope"] > 0:
        add("low cardiac output on inotropes", f.evidence("inotropes"))
    elif ned <= 0 and x["hypotension"]:
        add(f"hypotension (MAP {_fmt(x['map'], 0)} mmHg)", f.evidence("map"))
    elif x["sepsis3"]:
        add("sepsis (Sepsis-3 criteria met)", f.evidence("antibiotic", "lactate"))
    vent = x["vent"]
    hypoxemic = (x["pf"] is not None and x["pf"] < PF_CUTOFF) or (
        x["fio2"] is not None and x["fio2"] >= 0.5
    ) or (x["spo2"] is not None and x["spo2"] < 92)
    if vent == "invasive":
        text = (
            "hypoxemic respiratory failure on invasive ventilation"
            if hypoxemic
            else "respiratory failure on invasive ventilation"
        )
        if x["pf"] is not None and x["pf"] < PF_CUTOFF:
            text += f" (P/F {_fmt(x['pf'], 0)})"
        add(text, f.evidence("ventilation", "pf_ratio", "spo2", limit=1))
    elif vent in ("niv", "hfnc"):
        device = "non-invasive ventilation" if vent == "niv" else "high-flow nasal oxygen"
        add(
            f"hypoxemic respiratory failure on {device}",
            f.evidence("ventilation", "spo2", limit=1),
        )
    elif x["spo2"] is not None and x["spo2"] < 90:
        add(f"hypoxemia (SpO2 {_fmt(x['spo2'], 0)}%)", f.evidence("spo2", "ventilation"))
    if lactate_high:
        severity = "severe hyperlactatemia" if x["lactate"] >= 4 else "hyperlactatemia"
        add(f"{severity} (lactate {_fmt(x['lactate'])} mmol/L)", f.evidence("lactate"))
    if x["ph"] is not None and x["ph"] < 7.30:
        add(f"acidemia (pH {x['ph']:.2f})", f.evidence("ph"))
    coag = []
    if x["inr"] is not None and x["inr"] >= 1.5:
        coag.append(f"INR {_fmt(x['inr'])}")
    if x["platelets"] is not None and x["platelets"] < 100:
        coag.append(f"platelets {_fmt(x['platelets'], 0)}")
    if coag:
        add(f"coagulopathy ({', '.join(coag)})", f.evidence("inr", "platelets"))
    if x["bilirubin"] is not None and x["bilirubin"] >= 2:
        add(f"liver dysfunction (bilirubin {_fmt(x['bilirubin'])} mg/dL)", f.evidence("bilirubin"))
    if x["gcs"] is not None and x["gcs"] <= 8:
        add(f"depressed consciousness (GCS {int(x['gcs'])})", f.evidence("gcs"))
    if x["temp"] is not None and x["temp"] >= 38.3:
        add(f"fever ({_fmt(x['temp'])} °C)", f.evidence("temp"))
    if x["hr"] is not None and x["hr"] > 130:
        add(f"tachycardia (HR {_fmt(x['hr'], 0)})", f.evidence("hr"))
    return out


def _actions_and_flags(f: _Window, x: dict) -> tuple[list[dict], list[dict]]:
    """Recommended actions and red flags, each a clinical action in words (a
    drug, a target, a manoeuvre), never the name of a charted item.

    Surviving Sepsis Campaign 2021: MAP target 65 mmHg; norepinephrine first;
    vasopressin added when norepinephrine reaches VASOPRESSIN_ADD_NE; fluid
    given as boluses with reassessment, and norepinephrine started when
    hypotension persists; antimicrobials within 1 hour of possible septic
    shock; lactate re-measured while raised. All of these act on *sustained*
    hypotension (hourly means, MAP_TARGET), never on one reading. Lung-protective
    ventilation (6-8 mL/kg predicted body weight) and prone position when P/F
    < 150 (PROSEVA, Guérin et al. 2013). KDIGO 2012: avoid nephrotoxins in AKI.
    Under CRRT, fluid is removed by ultrafiltration: no boluses without
    hypotension."""
    actions: list[dict] = []
    flags: list[dict] = []

    def act(text: str, ids: list[int]) -> None:
        actions.append({"text": text, "evidence": ids})

    def flag(text: str, ids: list[int]) -> None:
        flags.append({"text": text, "evidence": ids})

    hypotension = x["hypotension"]
    ned = x["ned"] or 0.0
    if hypotension and x["norepinephrine"] > 0:
        act(
            "Titrate norepinephrine up to MAP >= 65 mmHg",
            f.evidence("vasopressors", "map"),
        )
        if x["norepinephrine"] >= VASOPRESSIN_ADD_NE and x["vasopressin"] <= 0:
            act(
                "Add vasopressin 0.03 U/min (norepinephrine >= 0.25 mcg/kg/min)",
                f.evidence("vasopressors", "map"),
            )
    elif hypotension and ned > 0:
        act(
            "Add norepinephrine to reach MAP >= 65 mmHg",
            f.evidence("vasopressors", "map"),
        )
    elif hypotension and x["crrt"]:
        act(
            "Start norepinephrine for MAP < 65 mmHg rather than giving fluid (on CRRT)",
            f.evidence("map", "crrt"),
        )
    elif hypotension:
        act(
            "Give a 500 mL crystalloid fluid challenge and reassess; start "
            "norepinephrine if MAP stays below 65 mmHg",
            f.evidence("map"),
        )
    if hypotension and ned > 0:
        flag(
            "Do not wean vasopressors while MAP is below 65 mmHg",
            f.evidence("map", "vasopressors"),
        )
    if x["infection"] and ned > 0 and not x["antibiotic_recent"]:
        act(
            "Give broad-spectrum antimicrobials within 1 hour (possible septic shock)",
            f.evidence("vasopressors", "lactate"),
        )
    if x["lactate"] is not None and x["lactate"] >= LACTATE_HIGH:
        act("Repeat lactate within 2 hours to guide resuscitation", f.evidence("lactate"))
    if x["vent"] == "invasive" and x["pf"] is not None and x["pf"] < 150:
        act(
            "Prone position for at least 12 h a day (P/F < 150 on invasive ventilation)",
            f.evidence("pf_ratio", "ventilation"),
        )
    if x["vent"] == "invasive" and (
        (x["pf"] is not None and x["pf"] < PF_CUTOFF)
        or (x["fio2"] is not None and x["fio2"] >= 0.5)
    ):
        flag(
            "Avoid tidal volumes above 8 mL/kg predicted body weight",
            f.evidence("ventilation", "pf_ratio", limit=1),
        )
    if x["gcs"] is not None and x["gcs"] <= 8 and x["vent"] != "invasive":
        act("Secure the airway (GCS <= 8 without invasive ventilation)", f.evidence("gcs"))
        flag("Avoid deep sedation without a secured airway", f.evidence("gcs"))
    if x["aki"] is not None and x["aki"] >= 2:
        flag(
            "Avoid nephrotoxic drugs (NSAIDs, aminoglycosides, IV contrast) with AKI",
            f.evidence("creatinine", "crrt", "urine"),
        )
    if x["crrt"] and not hypotension:
        flag(
            "Avoid fluid boluses under CRRT (remove fluid by ultrafiltration)",
            f.evidence("crrt"),
        )
    if x["platelets"] is not None and x["platelets"] < 50:
        flag(
            "Avoid therapeutic anticoagulation and invasive procedures with "
            "platelets < 50",
            f.evidence("platelets"),
        )
    return actions, flags


def _ratings(f: _Window, x: dict) -> list[dict]:
    """Each recorded action rated acceptable unless a rule speaks (sustained
    hypotension as in _actions_and_flags): a vasopressor start or increase
    during hypotension best practice, a decrease or stop then potentially
    harmful; antimicrobials with suspected infection or sepsis best practice;
    fluid boluses best practice for hypotension off CRRT, potentially harmful
    under CRRT without hypotension; CRRT actions with KDIGO stage 3 best
    practice; FiO2 raised with SpO2 < 92 % best practice; anticoagulants with
    platelets < 50 potentially harmful."""
    hypotension = x["hypotension"]
    out = []
    for event in f.context.recorded_actions:
        category, domain = event["category"], event["domain"]
        text = str(event["text"]).lower()
        rating, evidence = "acceptable", []
        if category in VASOPRESSORS and domain in MED_DOMAINS:
            previous = f.previous_rate(event)
            value = _num(event["value"])
            stopping = text in {"stop", "stopped", "paused"} or value == 0
            up = not stopping and (
                text == "start" or previous is None or (value is not None and value > previous)
            )
            down = stopping or (value is not None and previous is not None and value < previous)
            if hypotension and up:
                rating, evidence = "best_practice", f.cite("map", limit=2)
            elif hypotension and down:
                rating, evidence = "potentially_harmful", f.cite("map", limit=2)
        elif category in ANTIBIOTICS and x["infection"]:
            rating, evidence = "best_practice", f.cite("lactate", "vasopressors", limit=1)
        elif category in FLUID_BOLUS:
            if x["crrt"] and not hypotension:
                rating, evidence = "potentially_harmful", f.cite("crrt", limit=1)
            elif hypotension and not x["crrt"]:
                rating, evidence = "best_practice", f.cite("map", limit=2)
        elif domain == "crrt_therapy" and (x["aki"] or 0) >= 3:
            rating, evidence = "best_practice", f.cite("creatinine", limit=1)
        elif category == "fio2_set" and x["spo2"] is not None and x["spo2"] < 92:
            previous = f.previous_rate(event)
            value = _num(event["value"])
            if value is not None and (previous is None or value > previous):
                rating, evidence = "best_practice", f.cite("spo2", limit=2)
        elif category in ANTICOAGULANTS and x["platelets"] is not None and x["platelets"] < 50:
            rating, evidence = "potentially_harmful", f.cite("platelets", limit=1)
        out.append({"event_id": event["id"], "rating": rating, "evidence": evidence})
    return out


def rules_label(context: WindowContext) -> tuple[str, dict]:
    """The status and label payload (oracle.models.OracleLabel shape) of one
    window, validated by the same reply-level rules as an LLM reply."""
    f = _Window(context)
    x = _findings(f)
    status, status_ids = _status(f)
    actions, flags = _actions_and_flags(f, x)
    payload = {
        "status_evidence": status_ids,
        "acute_problems": _problems(f, x),
        "action_ratings": _ratings(f, x),
        "added_actions": actions,
        "red_flags": flags,
    }
    return payload_validate(
        status,
        payload,
        allowed_event_ids=context.allowed_event_ids,
        recorded_action_ids=[e["id"] for e in context.recorded_actions],
    )


class RulesBackbone:
    """The offline default backbone: rules_label over each window, in order."""

    kind = "rules"
    model = MODEL

    def __init__(self):
        self.parameters: dict = {}

    def label_many(
        self,
        contexts: list[WindowContext],
        *,
        on_result: Callable[[BackboneResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[BackboneResult]:
        results = []
        for context in contexts:
            if should_stop is not None and should_stop():
                break
            started = time.monotonic()
            try:
                status, payload = rules_label(context)
            except Exception as error:  # a rule bug must not sink the whole run
                result = BackboneResult(
                    window_id=context.window_id,
                    ok=False,
                    error=f"The rules backbone could not label this window: {error}",
                    latency_ms=int((time.monotonic() - started) * 1000),
                )
            else:
                result = BackboneResult(
                    window_id=context.window_id,
                    ok=True,
                    status=status,
                    payload=payload,
                    latency_ms=int((time.monotonic() - started) * 1000),
                    raw_response=_json({"status": status, **payload}),
                )
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results


def _json(data) -> str:
    return json.dumps(data, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
