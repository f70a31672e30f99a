"""The rules backbone ("rules", model "rules-v1"): the offline default Oracle.
It labels a window deterministically from the stay's concept tracks
(windows.concepts, definitions in /work/shared/CLINICAL_CONCEPTS.md) and the
events of its context, with no LLM and no database access.

What it reads, per window: the hourly track rows that cover the window ("now":
the hours ending at ceil(start) and ceil(end)) and the six hours that end two
hours before the window ("before"). Evidence is the ids of the context's events
that drive each finding, those nearest the window first.
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

MODEL = "rules-v1"
VASOPRESSORS = ("norepinephrine", "epinephrine", "vasopressin", "phenylephrine", "dopamine")
INOTROPES = ("dobutamine", "milrinone")
_RULE_CATEGORIES = {r["key"]: set(r["categories"]) for r in DEFAULT_CRITICAL_ACTION_RULES}
FLUID_BOLUS = _RULE_CATEGORIES["fluid_boluses"]
MED_DOMAINS = ("medication_admin_continuous", "medication_admin_intermittent")
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
        frame = context.tracks
        now_lo, now_hi = math.ceil(self.start_h), math.ceil(self.end_h)
        if now_hi == now_lo:
            now_hi += 1
        if frame is not None and len(frame):
            hours = frame.index.to_numpy(dtype=float)
            self.now = frame[(hours >= now_lo) & (hours <= now_hi)]
            self.before = frame[(hours > now_lo - 8) & (hours <= now_lo - 2)]
        else:
            self.now = self.before = None
        self.events = sorted(context.events, key=lambda e: (self._distance(e), -e["id"]))
        self.static = context.static or {}

    def _distance(self, event) -> float:
        h = event["hours"]
        if self.start_h <= h < self.end_h:
            return 0.0
        # Past events first at equal distance: the window is judged on what led to it.
        return min(abs(h - self.start_h), abs(h - self.end_h)) + (0.01 if h >= self.end_h else 0)

    def _series(self, rows, column):
        if rows is None or column not in rows:
            return []
        return [v for v in rows[column].tolist() if v is not None and v == v]

    def value(self, column: str, how: str = "last", *, when: str = "now"):
        """A track over "now" or "before": last known, min or max; None if unknown."""
        values = self._series(self.now if when == "now" else self.before, column)
        if not values:
            return None
        if column == "ventilation":
            ranked = [v for v in values if v in VENTILATION_STATUSES]
            if not ranked:
                return None
            return max(ranked, key=VENTILATION_STATUSES.index) if how == "max" else ranked[-1]
        numbers = [n for n in (_num(v) for v in values) if n is not None]
        if not numbers:
            return None
        return {"last": numbers[-1], "min": min(numbers), "max": max(numbers)}[how]

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


def _status(f: _Window) -> tuple[str, list[int]]:
    """Patient status from trends, "now" against "before" (spec section 3:
    relative to the recent context). Signs of deterioration and of improvement
    are weighted (SOFA, vasopressor dose and ventilation support 2; lactate,
    FiO2, MAP, KDIGO stage and GCS 1); the net sign decides, ties are stable.
    SOFA is the 24-h worst score (CLINICAL_CONCEPTS.md 9c), so a change of 2 or
    more counts; the norepinephrine-equivalent dose is section 5's."""
    worse: list[tuple[int, tuple]] = []
    better: list[tuple[int, tuple]] = []

    def compare(column, how, threshold, weight, keys, *, higher_is_worse=True):
        now, before = f.value(column, how), f.value(column, how, when="before")
        if now is None or before is None:
            return
        delta = now - before if higher_is_worse else before - now
        if delta >= threshold:
            worse.append((weight, keys))
        elif delta <= -threshold:
            better.append((weight, keys))

    compare("sofa", "max", 2, 2, ("creatinine", "platelets", "map", "vasopressors", "gcs"))
    compare("lactate", "last", 1.0, 1, ("lactate",))
    compare("fio2", "max", 0.2, 1, ("fio2",))
    compare("gcs", "min", 3, 1, ("gcs",), higher_is_worse=False)
    compare("aki_stage", "max", 1, 1, ("creatinine", "urine", "crrt"))
    ned_now, ned_before = f.value("ned", "last"), f.value("ned", "max", when="before")
    if ned_now is not None and ned_before is not None:
        if ned_now - ned_before >= 0.05 and ned_now >= 1.25 * ned_before:
            worse.append((2, ("vasopressors", "map")))
        elif ned_before > 0 and ned_now <= 0.5 * ned_before:
            better.append((2, ("vasopressors", "map")))
    vent_now, vent_before = f.value("ventilation", "max"), f.value(
        "ventilation", "max", when="before"
    )
    if vent_now and vent_before:
        rank = VENTILATION_STATUSES.index
        if rank(vent_now) > rank(vent_before):
            worse.append((2, ("ventilation",)))
        elif rank(vent_now) < rank(vent_before):
            better.append((2, ("ventilation",)))
    map_now, map_before = f.value("map_min", "min"), f.value("map_min", "min", when="before")
    if map_now is not None and map_before is not None:
        if map_now < 65 <= map_before:
            worse.append((1, ("map",)))
        elif map_before < 65 <= map_now:
            better.append((1, ("map",)))
    net = sum(w for w, _ in worse) - sum(w for w, _ in better)
    status = "deteriorating" if net > 0 else "improving" if net < 0 else "stable"
    drivers = worse if net > 0 else better if net < 0 else []
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
    get = f.value
    septic_group = "sepsis" in str(f.static.get("disease_group", "")).lower()
    return {
        "aki": max(
            (
                v
                for v in (get("aki_stage", "max"), get("aki_stage_smoothed", "max"))
                if v is not None
            ),
            default=None,
        ),
        "crrt": (get("crrt_active", "max") or 0) >= 1,
        "creatinine": get("creatinine"),
        "ned": get("ned", "last"),
        "norepinephrine": get("norepinephrine", "last") or 0.0,
        "vasopressin": get("vasopressin", "last") or 0.0,
        "inotrope": max(get("dobutamine", "last") or 0.0, get("milrinone", "last") or 0.0),
        "map_min": get("map_min", "min"),
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
        "antibiotic_recent": (get("antibiotic", "max") or 0) >= 1
        or (get("antibiotic", "max", when="before") or 0) >= 1,
    }


def _problems(f: _Window, x: dict) -> list[dict]:
    """Acute problems from active findings: KDIGO AKI stage (CLINICAL_CONCEPTS.md
    4d, stage 3 on CRRT), shock by vasopressor dose (5; septic when Sepsis-3 (10c),
    suspected infection (10b) or a sepsis diagnosis group), respiratory failure by
    ventilation status (6b) and P/F or FiO2 (7), hyperlactatemia (lactate >= 2
    mmol/L), acidemia (arterial pH < 7.30), coagulopathy (INR >= 1.5, platelets
    < 100), liver dysfunction (bilirubin >= 2 mg/dL, SOFA liver 2), depressed
    consciousness (GCS <= 8), fever (>= 38.3 °C), tachycardia (> 130/min)."""
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
    if ned > 0:
        kind = "septic shock" if x["infection"] else "shock"
        text = f"{kind} on vasopressors (norepinephrine equivalent {_fmt(ned, 2)} mcg/kg/min)"
        add(text, f.evidence("vasopressors", "map", "lactate"))
    elif x["inotrope"] > 0:
        add("low cardiac output on inotropes", f.evidence("inotropes"))
    elif x["map_min"] is not None and x["map_min"] < 65:
        add(f"hypotension (MAP {_fmt(x['map_min'], 0)} mmHg)", f.evidence("map"))
    elif x["sepsis3"]:
        add("sepsis (Sepsis-3 criteria met)", f.evidence("antibiotic", "lactate"))
    vent = x["vent"]
    hypoxemic = (x["pf"] is not None and x["pf"] < 300) or (
        x["fio2"] is not None and x["fio2"] >= 0.5
    ) or (x["spo2"] is not None and x["spo2"] < 92)
    if vent == "invasive":
        text = (
            "hypoxemic respiratory failure on invasive ventilation"
            if hypoxemic
            else "respiratory failure on invasive ventilation"
        )
        if x["pf"] is not None and x["pf"] < 300:
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
    if x["lactate"] is not None and x["lactate"] >= 2:
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
    """Guideline rules. Surviving Sepsis Campaign 2021: MAP target 65 mmHg,
    norepinephrine first, vasopressin added when norepinephrine reaches
    0.25-0.5 mcg/kg/min, antimicrobials within 1 hour of septic shock, lactate
    re-measured while raised. Lung-protective ventilation (6 mL/kg PBW, prone
    position when P/F < 150). KDIGO 2012: avoid nephrotoxins in AKI. Under
    CRRT, fluid is removed by ultrafiltration: boluses only for proven
    hypovolaemia (fluid overload)."""
    actions: list[dict] = []
    flags: list[dict] = []
    map_low = x["map_min"] is not None and x["map_min"] < 65
    if x["norepinephrine"] > 0 and map_low:
        text = "Escalate vasopressor support to restore MAP >= 65 mmHg (titrate norepinephrine up"
        if x["norepinephrine"] >= 0.25 and x["vasopressin"] <= 0:
            text += ", add vasopressin"
        actions.append({"text": text + ")", "evidence": f.evidence("vasopressors", "map")})
    elif (x["ned"] or 0) > 0 and map_low:
        actions.append(
            {
                "text": "Escalate vasopressor support to restore MAP >= 65 mmHg",
                "evidence": f.evidence("vasopressors", "map"),
            }
        )
    elif map_low:
        if x["crrt"]:
            text = "Start norepinephrine for MAP < 65 mmHg rather than giving more fluid"
        else:
            text = (
                "Give a fluid challenge and start norepinephrine if MAP stays below 65 mmHg"
            )
        actions.append({"text": text, "evidence": f.evidence("map")})
    if (x["ned"] or 0) > 0 and map_low:
        flags.append(
            {
                "text": "Do not wean vasopressors while MAP is below 65 mmHg",
                "evidence": f.evidence("map", "vasopressors"),
            }
        )
    if x["infection"] and (x["ned"] or 0) > 0 and not x["antibiotic_recent"]:
        actions.append(
            {
                "text": "Give broad-spectrum antimicrobials within 1 hour (septic shock)",
                "evidence": f.evidence("vasopressors", "lactate"),
            }
        )
    if x["lactate"] is not None and x["lactate"] >= 2:
        actions.append(
            {
                "text": "Repeat lactate within 2 hours to guide resuscitation",
                "evidence": f.evidence("lactate"),
            }
        )
    if x["vent"] == "invasive" and x["pf"] is not None and x["pf"] < 150:
        actions.append(
            {
                "text": "Optimize PEEP and consider prone positioning (P/F < 150)",
                "evidence": f.evidence("pf_ratio", "ventilation"),
            }
        )
    if x["vent"] == "invasive" and (
        (x["pf"] is not None and x["pf"] < 300) or (x["fio2"] is not None and x["fio2"] >= 0.5)
    ):
        flags.append(
            {
                "text": "Avoid tidal volumes above 8 mL/kg predicted body weight",
                "evidence": f.evidence("ventilation", "pf_ratio", limit=1),
            }
        )
    if x["gcs"] is not None and x["gcs"] <= 8 and x["vent"] != "invasive":
        actions.append(
            {"text": "Secure the airway (GCS <= 8 without invasive ventilation)",
             "evidence": f.evidence("gcs")}
        )
        flags.append(
            {"text": "Avoid deep sedation without a secured airway", "evidence": f.evidence("gcs")}
        )
    if x["aki"] is not None and x["aki"] >= 2:
        flags.append(
            {
                "text": "Avoid nephrotoxic drugs (NSAIDs, aminoglycosides, IV contrast) "
                "with AKI",
                "evidence": f.evidence("creatinine", "crrt", "urine"),
            }
        )
    if x["crrt"] and not map_low:
        flags.append(
            {
                "text": "Avoid fluid boluses under CRRT (fluid overload; remove fluid by "
                "ultrafiltration)",
                "evidence": f.evidence("crrt"),
            }
        )
    if x["platelets"] is not None and x["platelets"] < 50:
        flags.append(
            {
                "text": "Avoid therapeutic anticoagulation and invasive procedures with "
                "platelets < 50",
                "evidence": f.evidence("platelets"),
            }
        )
    return actions, flags


def _ratings(f: _Window, x: dict) -> list[dict]:
    """Each recorded action rated acceptable unless a rule speaks: vasopressor
    start or increase with MAP < 65 best practice, decrease or stop then
    potentially harmful; antimicrobials with suspected infection or sepsis best
    practice; fluid boluses best practice for MAP < 65 off CRRT, potentially
    harmful under CRRT without hypotension; CRRT actions with KDIGO stage 3 best
    practice; FiO2 raised with SpO2 < 92 % best practice; anticoagulants with
    platelets < 50 potentially harmful."""
    map_low = x["map_min"] is not None and x["map_min"] < 65
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
            if map_low and up:
                rating, evidence = "best_practice", f.cite("map", limit=2)
            elif map_low and down:
                rating, evidence = "potentially_harmful", f.cite("map", limit=2)
        elif category in ANTIBIOTICS and x["infection"]:
            rating, evidence = "best_practice", f.cite("lactate", "vasopressors", limit=1)
        elif category in FLUID_BOLUS:
            if x["crrt"] and not map_low:
                rating, evidence = "potentially_harmful", f.cite("crrt", limit=1)
            elif map_low and not x["crrt"]:
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
