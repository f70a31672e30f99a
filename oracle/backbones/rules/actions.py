"""Recommended actions, red flags and the ratings of the recorded actions of a
window, from its findings (oracle.backbones.rules.problems._findings)."""

from __future__ import annotations

from annotation.critical import ANTICOAGULANTS
from oracle.backbones.rules.thresholds import (
    FLUID_BOLUS,
    LACTATE_HIGH,
    MED_DOMAINS,
    PF_CUTOFF,
    VASOPRESSIN_ADD_NE,
    VASOPRESSORS,
)
from oracle.backbones.rules.window import _num, _Window
from windows.concepts.sepsis import ANTIBIOTICS


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
        act(
            "Repeat lactate within 2 hours to guide resuscitation",
            f.evidence("lactate"),
        )
    if x["vent"] == "invasive" and x["pf"] is not None and x["pf"] < 150:
        act(
            "Prone position for at least 12 h a day (P/F < 150 on invasive "
            "ventilation)",
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
        act(
            "Secure the airway (GCS <= 8 without invasive ventilation)",
            f.evidence("gcs"),
        )
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
                text == "start"
                or previous is None
                or (value is not None and value > previous)
            )
            down = stopping or (
                value is not None and previous is not None and value < previous
            )
            if hypotension and up:
                rating, evidence = "best_practice", f.cite("map", limit=2)
            elif hypotension and down:
                rating, evidence = "potentially_harmful", f.cite("map", limit=2)
        elif category in ANTIBIOTICS and x["infection"]:
            rating, evidence = (
                "best_practice",
                f.cite("lactate", "vasopressors", limit=1),
            )
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
        elif (
            category in ANTICOAGULANTS
            and x["platelets"] is not None
            and x["platelets"] < 50
        ):
            rating, evidence = "potentially_harmful", f.cite("platelets", limit=1)
        out.append({"event_id": event["id"], "rating": rating, "evidence": evidence})
    return out
