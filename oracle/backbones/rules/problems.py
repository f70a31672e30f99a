"""The findings of a window (what is true of the patient there, read once) and
the acute problems they name."""

from __future__ import annotations

from oracle.backbones.rules.thresholds import (
    AKI_RECOVERY_HOURS,
    ANTIBIOTIC_LOOKBACK_HOURS,
    LACTATE_HIGH,
    PF_CUTOFF,
    SEPTIC_SHOCK_LACTATE,
    SHOCK_NED_MIN,
)
from oracle.backbones.rules.window import _Window


def _fmt(value: float, digits: int = 1) -> str:
    return (
        f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else str(round(value))
    )


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
        "inotrope": max(
            get("dobutamine", "last") or 0.0, get("milrinone", "last") or 0.0
        ),
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
      cardiovascular 4, 9b); septic shock when, besides, lactate is above
      SEPTIC_SHOCK_LACTATE (Sepsis-3: > 2 mmol/L) and there is an infection
      (Sepsis-3, 10c; suspected infection, 10b; or a sepsis diagnosis group);
      below it, low-dose vasopressor support
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
        septic = (
            x["infection"]
            and x["lactate"] is not None
            and x["lactate"] > SEPTIC_SHOCK_LACTATE
        )
        kind = "septic shock" if septic else "shock"
        text = (
            f"{kind} on vasopressors "
            f"(norepinephrine equivalent {_fmt(ned, 2)} mcg/kg/min)"
        )
        add(text, f.evidence("vasopressors", "map", "lactate"))
    elif ned > 0 and (x["hypotension"] or lactate_high):
        why = (
            f"MAP {_fmt(x['map'], 0)} mmHg"
            if x["hypotension"]
            else (f"lactate {_fmt(x['lactate'])} mmol/L")
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
    hypoxemic = (
        (x["pf"] is not None and x["pf"] < PF_CUTOFF)
        or (x["fio2"] is not None and x["fio2"] >= 0.5)
        or (x["spo2"] is not None and x["spo2"] < 92)
    )
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
        device = (
            "non-invasive ventilation" if vent == "niv" else "high-flow nasal oxygen"
        )
        add(
            f"hypoxemic respiratory failure on {device}",
            f.evidence("ventilation", "spo2", limit=1),
        )
    elif x["spo2"] is not None and x["spo2"] < 90:
        add(
            f"hypoxemia (SpO2 {_fmt(x['spo2'], 0)}%)", f.evidence("spo2", "ventilation")
        )
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
        add(
            f"liver dysfunction (bilirubin {_fmt(x['bilirubin'])} mg/dL)",
            f.evidence("bilirubin"),
        )
    if x["gcs"] is not None and x["gcs"] <= 8:
        add(f"depressed consciousness (GCS {int(x['gcs'])})", f.evidence("gcs"))
    if x["temp"] is not None and x["temp"] >= 38.3:
        add(f"fever ({_fmt(x['temp'])} °C)", f.evidence("temp"))
    if x["hr"] is not None and x["hr"] > 130:
        add(f"tachycardia (HR {_fmt(x['hr'], 0)})", f.evidence("hr"))
    return out
