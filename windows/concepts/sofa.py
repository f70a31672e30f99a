"""SOFA score per hour with its 24-hour worst (CLINICAL_CONCEPTS.md section 9;
Vincent et al., Intensive Care Med 1996, as implemented by mimic-code)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from windows.concepts.grid import Stay
from windows.concepts.labs import lab_hourly

WINDOW_HOURS = 24


def _score(conditions: list, choices: list, missing) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        score = np.select(conditions, choices, default=0).astype(float)
    return np.where(missing, np.nan, score)


def respiration(pf_vent: np.ndarray, pf_novent: np.ndarray) -> np.ndarray:
    """Section 9b: 4 if ventilated P/F < 100; 3 if ventilated < 200; 2 if any
    < 300; 1 if any < 400; else 0 (a non-ventilated P/F scores at most 2); NaN
    without a P/F."""
    return _score(
        [
            pf_vent < 100,
            pf_vent < 200,
            (pf_novent < 300) | (pf_vent < 300),
            (pf_novent < 400) | (pf_vent < 400),
        ],
        [4, 3, 2, 1],
        np.isnan(pf_vent) & np.isnan(pf_novent),
    )


def coagulation(platelets_min: np.ndarray) -> np.ndarray:
    """Section 9b: platelets (10^3/uL) < 20 -> 4, < 50 -> 3, < 100 -> 2,
    < 150 -> 1, else 0."""
    p = platelets_min
    return _score([p < 20, p < 50, p < 100, p < 150], [4, 3, 2, 1], np.isnan(p))


def liver(bilirubin_max: np.ndarray) -> np.ndarray:
    """Section 9b: bilirubin (mg/dL) >= 12 -> 4, >= 6 -> 3, >= 2 -> 2,
    >= 1.2 -> 1, else 0."""
    b = bilirubin_max
    return _score([b >= 12, b >= 6, b >= 2, b >= 1.2], [4, 3, 2, 1], np.isnan(b))


def cardiovascular(
    map_min, norepinephrine, epinephrine, dopamine, dobutamine
) -> np.ndarray:
    """Section 9b with rates in mcg/kg/min at the hour end: 4 if dopamine > 15,
    epinephrine > 0.1 or norepinephrine > 0.1; 3 if dopamine > 5 or any
    epinephrine or norepinephrine; 2 if any dopamine or dobutamine; 1 if
    MAP < 70; else 0. NaN with neither MAP nor a vasopressor."""
    ne, epi, dopa, dobu = norepinephrine, epinephrine, dopamine, dobutamine
    pressor = (ne > 0) | (epi > 0) | (dopa > 0) | (dobu > 0)
    return _score(
        [
            (dopa > 15) | (epi > 0.1) | (ne > 0.1),
            (dopa > 5) | (epi > 0) | (ne > 0),
            (dopa > 0) | (dobu > 0),
            map_min < 70,
        ],
        [4, 3, 2, 1],
        np.isnan(map_min) & ~pressor,
    )


def cns(gcs_min: np.ndarray) -> np.ndarray:
    """Section 9b: GCS < 6 -> 4, 6-9 -> 3, 10-12 -> 2, 13-14 -> 1, 15 -> 0."""
    g = gcs_min
    return _score([g < 6, g < 10, g < 13, g < 15], [4, 3, 2, 1], np.isnan(g))


def renal(creatinine_max: np.ndarray, uo_24h: np.ndarray) -> np.ndarray:
    """Section 9b: creatinine (mg/dL) >= 5.0 or urine < 200 mL/day -> 4;
    >= 3.5 or urine < 500 mL/day -> 3; >= 2.0 -> 2; >= 1.2 -> 1; else 0."""
    c, u = creatinine_max, uo_24h
    return _score(
        [(c >= 5) | (u < 200), (c >= 3.5) | (u < 500), c >= 2, c >= 1.2],
        [4, 3, 2, 1],
        np.isnan(c) & np.isnan(u),
    )


def hourly_components(stay: Stay, inputs: dict[str, np.ndarray]) -> pd.DataFrame:
    """The six components per hour from that hour's inputs (section 9a):
    ``pf_vent_min``, ``pf_novent_min``, ``platelets_min``, ``bilirubin_max``,
    ``map_min``, the vasopressor rates at the hour end, ``gcs`` (min),
    ``creatinine_max``, ``uo_24h``. NaN where the hour has no input."""
    i = inputs
    return pd.DataFrame(
        {
            "respiration": respiration(i["pf_vent_min"], i["pf_novent_min"]),
            "coagulation": coagulation(i["platelets_min"]),
            "liver": liver(i["bilirubin_max"]),
            "cardiovascular": cardiovascular(
                i["map_min"],
                i["norepinephrine"],
                i["epinephrine"],
                i["dopamine"],
                i["dobutamine"],
            ),
            "cns": cns(i["gcs"]),
            "renal": renal(i["creatinine_max"], i["uo_24h"]),
        }
    )


def worst_24h(components: pd.DataFrame) -> pd.DataFrame:
    """Section 9c: each component's maximum over the hour and the 23 before it
    (missing counts 0), and ``sofa`` = their sum. Columns ``sofa_<component>``."""
    worst = components.fillna(0).rolling(WINDOW_HOURS, min_periods=1).max()
    out = worst.add_prefix("sofa_")
    out["sofa"] = worst.sum(axis=1)
    return out


def sofa_inputs(
    stay: Stay, *, tracks: dict, pf: pd.DataFrame, urine: pd.DataFrame
) -> dict:
    """Collect the per-hour SOFA inputs from the other concept modules."""
    vent = pf[pf["vent"].astype(bool)]
    novent = pf[~pf["vent"].astype(bool)]
    return {
        "pf_vent_min": stay.hourly(vent["t"].to_numpy(), vent["pf"].to_numpy(), "min"),
        "pf_novent_min": stay.hourly(
            novent["t"].to_numpy(), novent["pf"].to_numpy(), "min"
        ),
        "platelets_min": lab_hourly(stay, "platelets", "min"),
        "bilirubin_max": lab_hourly(stay, "bilirubin", "max"),
        "creatinine_max": lab_hourly(stay, "creatinine", "max"),
        "uo_24h": stay.hourly(
            urine["t"].to_numpy(), urine["uo_24h_sofa"].to_numpy(), "max"
        ),
        "map_min": tracks["map_min"],
        "gcs": tracks["gcs"],
        "norepinephrine": tracks["norepinephrine"],
        "epinephrine": tracks["epinephrine"],
        "dopamine": tracks["dopamine"],
        "dobutamine": tracks["dobutamine"],
    }
