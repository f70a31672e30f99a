"""Antibiotics, suspicion of infection and Sepsis-3 (CLINICAL_CONCEPTS.md section
10; Singer et al., JAMA 2016, as implemented by mimic-code)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from windows.antibiotics import ANTIBIOTICS
from windows.concepts.grid import CULTURE_DOMAIN, HOUR, Stay, ceil_hours

MED_DOMAINS = ("medication_admin_intermittent", "medication_admin_continuous")
CULTURE_THEN_ANTIBIOTIC = 72 * HOUR  # section 10b
ANTIBIOTIC_THEN_CULTURE = 24 * HOUR
SOFA_BEFORE = 48 * HOUR  # section 10c
SOFA_AFTER = 24 * HOUR


@dataclass(frozen=True)
class Sepsis3:
    """The first Sepsis-3 match of a stay (section 10c); times in ns since intime."""

    onset: int  # suspicion of infection onset
    antibiotic_time: int
    culture_time: int
    sofa_time: int  # end of the first SOFA hour >= 2 in the window

    @property
    def met(self) -> int:
        """When both criteria are documented: the later of onset and sofa_time."""
        return max(self.onset, self.sofa_time)


def antibiotic_times(stay: Stay) -> np.ndarray:
    """Times an antibiotic (ANTIBIOTICS) was given: medication events recorded as
    actions (so not_given / held chartings, which the importers keep as
    observations, do not count) other than stops."""
    times = []
    for domain in MED_DOMAINS:
        rows = stay.select(domain, ANTIBIOTICS)
        if rows.empty:
            continue
        kind = rows["kind"].astype(object)
        action = rows["value_text"].astype(object).str.strip().str.lower()
        given = (
            kind.isin(["action", ""])
            & ~action.str.startswith("stop")
            & (action != "not_given")
        )
        times.append(rows.loc[given.to_numpy(), "t"].to_numpy(dtype=np.int64))
    return np.unique(np.concatenate(times)) if times else np.empty(0, dtype=np.int64)


def culture_times(stay: Stay) -> np.ndarray:
    """Times of culture events (any specimen; one per time)."""
    return np.unique(stay.domain(CULTURE_DOMAIN)["t"].to_numpy(dtype=np.int64))


def suspicion_of_infection(
    antibiotics: np.ndarray, cultures: np.ndarray, *, outtime_ns: int
) -> pd.DataFrame:
    """Section 10b pairing for antibiotics given in the ICU stay [intime, outtime).

    Each antibiotic is matched to the earliest culture taken in the 72 h before
    it (culture < antibiotic <= culture + 72 h) and to the earliest culture in
    the 24 h after it (antibiotic < culture <= antibiotic + 24 h). Suspected if
    either exists; onset = the culture time when a culture came first, else the
    antibiotic time. Returns one row per suspected antibiotic: ab_time,
    culture_time, onset, ordered as section 10c reads them.
    """
    ab = antibiotics[(antibiotics >= 0) & (antibiotics < outtime_ns)]
    if not len(ab) or not len(cultures):
        return pd.DataFrame(
            {"ab_time": [], "culture_time": [], "onset": []}, dtype=np.int64
        )
    n = len(cultures)
    before = np.searchsorted(cultures, ab - CULTURE_THEN_ANTIBIOTIC, side="left")
    c_before = cultures[np.minimum(before, n - 1)]
    culture_first = (before < n) & (c_before < ab)
    after = np.searchsorted(cultures, ab, side="right")
    c_after = cultures[np.minimum(after, n - 1)]
    antibiotic_first = (after < n) & (c_after <= ab + ANTIBIOTIC_THEN_CULTURE)
    suspected = culture_first | antibiotic_first
    out = pd.DataFrame(
        {
            "ab_time": ab,
            "culture_time": np.where(culture_first, c_before, c_after),
            "onset": np.where(culture_first, c_before, ab),
        }
    )[suspected]
    return out.sort_values(["onset", "ab_time", "culture_time"]).reset_index(drop=True)


def sepsis3(
    suspicion: pd.DataFrame, hour_ends: np.ndarray, sofa: np.ndarray
) -> Sepsis3 | None:
    """Section 10c: the first suspicion (by onset, antibiotic, culture time) with
    an hourly 24-h SOFA >= 2 whose hour end lies in [onset - 48 h, onset + 24 h];
    only hours >= 0 (ICU) count, baseline SOFA taken as 0."""
    qualifying = np.sort(hour_ends[(hour_ends >= 0) & (sofa >= 2)])
    if suspicion.empty or not len(qualifying):
        return None
    onset = suspicion["onset"].to_numpy(dtype=np.int64)
    idx = np.searchsorted(qualifying, onset - SOFA_BEFORE, side="left")
    hit = idx < len(qualifying)
    hit[hit] = qualifying[idx[hit]] <= onset[hit] + SOFA_AFTER
    if not hit.any():
        return None
    first = int(np.argmax(hit))
    row = suspicion.iloc[first]
    return Sepsis3(
        onset=int(row["onset"]),
        antibiotic_time=int(row["ab_time"]),
        culture_time=int(row["culture_time"]),
        sofa_time=int(qualifying[idx[first]]),
    )


def infection_tracks(stay: Stay, sofa: np.ndarray, *, cultures_available: bool | None):
    """Hourly infection tracks and the stay's Sepsis-3 match.

    - ``antibiotic``: 1 if an antibiotic was given in the hour, else 0. An
      antibiotic alone is not suspicion of infection.
    - ``suspected_infection``: 1 from the hour containing the first suspicion
      onset on (hindsight: the onset may be a culture time before the
      antibiotic that confirms it), else 0.
    - ``sepsis3``: 1 from the hour in which both Sepsis-3 criteria are
      documented (the later of the matched onset and its SOFA >= 2 hour), else 0.

    Cultures are required: when the data hold no culture events for the stay
    (e.g. the CLIF demo has no microbiology table) and ``cultures_available`` is
    not True, both are NaN (unknown), never inferred from antibiotics.
    """
    ab = antibiotic_times(stay)
    cultures = culture_times(stay)
    out = {
        "antibiotic": np.nan_to_num(stay.hourly(ab, np.ones(len(ab)), "max"), nan=0.0)
    }
    known = cultures_available if cultures_available is not None else len(cultures) > 0
    if not known:
        out["suspected_infection"] = stay.empty()
        out["sepsis3"] = stay.empty()
        return out, None, None
    suspicion = suspicion_of_infection(ab, cultures, outtime_ns=stay.outtime_ns)
    hours = stay.hours
    suspected = np.zeros(stay.n)
    if not suspicion.empty:
        suspected[hours >= ceil_hours(np.array([suspicion["onset"].min()]))[0]] = 1.0
    match = sepsis3(suspicion, stay.ends_ns, sofa)
    septic = np.zeros(stay.n)
    if match is not None:
        septic[hours >= ceil_hours(np.array([match.met]))[0]] = 1.0
    out["suspected_infection"] = suspected
    out["sepsis3"] = septic
    return out, suspicion, match
