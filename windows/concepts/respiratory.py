"""Ventilation status episodes, FiO2 and the PaO2/FiO2 ratio
(CLINICAL_CONCEPTS.md sections 6 and 7)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from windows.concepts.columns import STATUSES
from windows.concepts.grid import HOUR, Stay

# The code of a status (windows.concepts.columns.STATUSES, least to most support)
# is the priority used when two statuses share a time or an hour.
PRIORITY = {status: code for code, status in enumerate(STATUSES, start=1)}

# CLIF device_category (lower case) -> status. Section 6b classes MIMIC's devices;
# CLIF's categories group the same devices (consortium device_category.csv:
# endotracheal and tracheostomy tubes -> IMV, Bipap -> NIPPV, CPAP mask -> CPAP,
# high-flow cannula or neb -> High Flow NC, masks and cannulas -> Nasal Cannula,
# Face Mask, Trach Collar, Other).
DEVICE_STATUS = {
    "imv": "invasive",
    "nippv": "niv",
    "cpap": "niv",
    "high flow nc": "hfnc",
    "nasal cannula": "supplemental_o2",
    "face mask": "supplemental_o2",
    "trach collar": "supplemental_o2",
    "other": "supplemental_o2",
    "room air": "none",
}
# CLIF mode_category values whose MIMIC modes section 6b lists as invasive
# ventilation.
INVASIVE_MODES = {
    "assist control-volume control",
    "pressure control",
    "pressure-regulated volume control",
    "simv",
    "volume support",
}
# Modes that also occur on non-invasive ventilation (mask CPAP, NIV): charted
# without a device they continue the current ventilator status, invasive or
# non-invasive, and decide nothing on their own.
CONTINUING_MODES = {"pressure support/cpap", "other"}
EPISODE_GAP = 14 * HOUR  # section 6c
FIO2_LOOKBACK = 4 * HOUR  # section 7, fio2_chartevents
PF_CARRY = 12 * HOUR
# Specimen of a blood gas (section 7: MIMIC-IV 52033 Specimen Type, "ART." is
# arterial; "VEN.", "MIX." and "CENTRAL VENOUS" are not), read from the pO2's
# own text (the CLIF importer keeps the specimen there), a specimen_type result
# of the same time (MIMIC-IV), or a source name with the word "arterial"
# (MIMIC-IV chartevents 220224 "Arterial O2 pressure").
ARTERIAL, UNKNOWN, VENOUS = "arterial", "unknown", "venous"
_ARTERIAL_TEXT = re.compile(r"^\s*art|\barterial\b", re.IGNORECASE)
_VENOUS_TEXT = re.compile(r"ven|mix|central", re.IGNORECASE)


def specimen_of(text: str) -> str:
    """ARTERIAL, VENOUS or UNKNOWN from a specimen text ("ART.", "VEN.",
    "MIX.", "CENTRAL VENOUS", "arterial", "venous", "mixed venous", '')."""
    if _VENOUS_TEXT.search(text):
        return VENOUS
    if _ARTERIAL_TEXT.search(text):
        return ARTERIAL
    return UNKNOWN


def status_per_time(stay: Stay) -> pd.Series:
    """Ventilation status code (PRIORITY) at each charting time (index: ns since
    intime), section 6b in CLIF categories.

    A device charting decides the status; if several devices share a time the
    most supportive wins. An invasive ventilator mode charted without a device
    (or with a trach collar / a tracheostomy flag: a tracheostomy on the
    ventilator) means invasive ventilation. A device charted as "None" or
    "Room Air" means no support. A "Pressure Support/CPAP" or "Other" mode
    charted without a device continues the status of the row before it when
    that is invasive or non-invasive ventilation less than 14 h earlier (a
    ventilator still in use whose device was not charted again).
    """
    resp = stay.domain("respiratory_support")
    if resp.empty:
        return pd.Series(dtype=float)
    cat = resp["cat"].astype(object)
    status = cat.map(DEVICE_STATUS)
    no_device_text = (
        (cat == "")
        & resp["value_text"].str.strip().str.lower().isin(["none", "room air"])
        & resp["name"].str.lower().str.contains("device")
    )
    status = status.where(~no_device_text.to_numpy(), "none")
    is_device = status.notna().to_numpy()
    devices = pd.DataFrame(
        {
            "t": resp["t"].to_numpy()[is_device],
            "code": status[is_device].map(PRIORITY).to_numpy(),
            "trach": (
                (cat == "trach collar") | (resp["value_text"] == "tracheostomy")
            ).to_numpy()[is_device],
        }
    )
    per_time = devices.groupby("t").agg(code=("code", "max"), trach=("trach", "max"))
    mode = cat.str.removeprefix("mode:")
    t_all = resp["t"].to_numpy()
    mode_times = np.unique(t_all[mode.isin(INVASIVE_MODES).to_numpy()])
    continuing = np.unique(t_all[mode.isin(CONTINUING_MODES).to_numpy()])
    invasive = PRIORITY["invasive"]
    times = np.union1d(np.union1d(per_time.index.to_numpy(), mode_times), continuing)
    per_time = per_time.reindex(times)
    code = per_time["code"].to_numpy(dtype=float)
    trach = per_time["trach"].astype(float).fillna(0).to_numpy() > 0
    override = np.isin(times, mode_times) & (
        np.isnan(code) | (trach & (code < invasive))
    )
    code = np.where(override, invasive, code)

    # A continuing-mode row takes the status of the classified row before it,
    # through other such rows, while rows are less than 14 h apart.
    classified = ~np.isnan(code)
    gap = np.r_[np.inf, np.diff(times)] >= EPISODE_GAP
    segment = np.cumsum(classified | gap)
    inherited = pd.Series(code).groupby(segment).transform("first").to_numpy()
    ventilator = np.isin(inherited, [PRIORITY["niv"], invasive])
    code = np.where(~classified & ventilator, inherited, code)
    keep = ~np.isnan(code)
    return pd.Series(code[keep], index=times[keep])


def ventilation_episodes(stay: Stay) -> pd.DataFrame:
    """Episodes of one status (section 6c): a new episode starts at the first
    classified row, at a change of status, or 14 h or more after the previous row
    of the same status; each row lasts until the next classified row or for 14 h,
    whichever comes first, the last row until ICU discharge on the same terms.
    mimic-code ends a row followed by 14 h of silence at its own time (and
    drops episodes of a single time point); here the last charting is carried
    up to the bound, as CRRT is (windows.concepts.renal.crrt_periods): a
    patient charted on a ventilator at 08:00 and next at 23:00 was ventilated
    after 08:00. Columns: status (code), start, end (ns since intime).
    """
    codes = status_per_time(stay)
    if codes.empty:
        return pd.DataFrame({"status": [], "start": [], "end": []})
    t = codes.index.to_numpy(dtype=np.int64)
    s = codes.to_numpy(dtype=np.int64)
    gap_before = np.r_[np.inf, np.diff(t)]
    new = np.r_[True, s[1:] != s[:-1]] | (gap_before >= EPISODE_GAP)
    # The stay's last row runs to ICU discharge as to a next row (the grid reads
    # nothing later, windows.concepts.grid).
    until_discharge = stay.outtime_ns - t[-1]
    gap_after = np.r_[
        np.diff(t), until_discharge if until_discharge > 0 else np.iinfo(np.int64).max
    ]
    row_end = t + np.minimum(gap_after, EPISODE_GAP)
    episode = np.cumsum(new)
    frame = pd.DataFrame({"episode": episode, "status": s, "t": t, "row_end": row_end})
    episodes = frame.groupby("episode").agg(
        status=("status", "first"), start=("t", "first"), end=("row_end", "max")
    )
    return episodes[episodes["end"] > episodes["start"]].reset_index(drop=True)


def in_invasive_episode(episodes: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Whether each time lies in [start, end] of an invasive ventilation episode."""
    inv = episodes[episodes["status"] == PRIORITY["invasive"]].sort_values("start")
    t = np.asarray(t, dtype=np.int64)
    if inv.empty or not len(t):
        return np.zeros(len(t), dtype=bool)
    starts = inv["start"].to_numpy(dtype=np.int64)
    ends = inv["end"].to_numpy(dtype=np.int64)
    idx = np.searchsorted(starts, t, side="right") - 1
    ok = idx >= 0
    ok[ok] = t[ok] <= ends[idx[ok]]
    return ok


def clean_fio2(values: pd.Series) -> pd.Series:
    """FiO2 as a fraction (section 6a): 0.20-1 is a fraction, 20-100 a percent;
    anything else (including >1 and <20) is dropped."""
    v = values.astype(float)
    frac = v.where((v >= 0.2) & (v <= 1))
    return frac.fillna((v / 100).where((v >= 20) & (v <= 100)))


def fio2_per_time(stay: Stay) -> pd.Series:
    rows = stay.select("respiratory_support", "fio2_set")
    fio2 = clean_fio2(rows["value_num"])
    return fio2.groupby(rows["t"].to_numpy()).last().dropna()


def po2_specimens(stay: Stay) -> pd.DataFrame:
    """Every pO2 result (``po2_arterial``, > 0) with its specimen: columns t,
    po2, specimen (ARTERIAL, VENOUS or UNKNOWN).

    The specimen is the one the pO2's own text names (the CLIF importer keeps
    the source's specimen there, or the one the same collection's results show);
    else the one a ``specimen_type`` result at the same time names (MIMIC-IV
    52033); else arterial when the source's name has the word "arterial"
    ("Arterial O2 pressure"); else unknown. CLIF files every pO2 under
    po2_arterial whatever the sample, so the category proves nothing."""
    po2 = stay.select("labs", "po2_arterial")
    po2 = po2[po2["value_num"] > 0]
    own = po2["value_text"].astype(object).map(specimen_of).to_numpy(dtype=object)
    typed = stay.select("labs", "specimen_type")
    if not typed.empty:
        kinds = typed["value_text"].astype(object).map(specimen_of)
        by_time = kinds[kinds != UNKNOWN].groupby(typed["t"].to_numpy()).first()
        same_time = by_time.reindex(po2["t"].to_numpy()).to_numpy(dtype=object)
        own = np.where((own == UNKNOWN) & pd.notna(same_time), same_time, own)
    named = (
        po2["name"]
        .astype(object)
        .map(lambda n: bool(re.search(r"\barterial\b", n, re.IGNORECASE)))
    )
    own = np.where((own == UNKNOWN) & named.to_numpy(dtype=bool), ARTERIAL, own)
    return pd.DataFrame(
        {
            "t": po2["t"].to_numpy(dtype=np.int64),
            "po2": po2["value_num"].to_numpy(dtype=float),
            "specimen": own,
        }
    )


def pf_ratios(stay: Stay, episodes: pd.DataFrame) -> pd.DataFrame:
    """P/F at each pO2 result that is not venous (section 7): pO2 (mmHg) / FiO2
    (fraction), FiO2 from a blood-gas FiO2 at the same time (MIMIC ``fio2_lab``)
    if any, else the latest charted ``fio2_set`` in [gas - 4 h, gas]; no FiO2 ->
    no ratio. Columns t, pf, vent (gas inside an invasive-ventilation episode)
    and unknown (1 when the pO2's specimen is unknown, 0 when arterial).

    Section 7 scores only arterial specimens. A venous, mixed or central venous
    pO2 (specimens in po2_specimens) is never used. A pO2 of unknown specimen is
    used, flagged by ``unknown``: the CLIF demo records no specimen for most
    gases, and dropping them would leave its stays without a P/F. At one time,
    arterial results are used and unknown ones only when there is none."""
    gases = po2_specimens(stay)
    gases = gases[gases["specimen"] != VENOUS]
    if gases.empty:
        return pd.DataFrame(
            {"t": np.empty(0, np.int64), "pf": [], "vent": [], "unknown": []}
        )
    gases = gases.assign(unknown=(gases["specimen"] == UNKNOWN).astype(float))
    # Per time, the best-known specimen only (arterial before unknown).
    best = gases.groupby("t")["unknown"].transform("min")
    gases = gases[gases["unknown"] == best]
    per_time = gases.groupby("t").agg(po2=("po2", "mean"), unknown=("unknown", "min"))
    po2 = per_time["po2"]
    t = per_time.index.to_numpy(dtype=np.int64)

    charted = fio2_per_time(stay)
    fio2 = np.full(len(t), np.nan)
    if not charted.empty:
        times = charted.index.to_numpy(dtype=np.int64)
        idx = np.searchsorted(times, t, side="right") - 1
        ok = idx >= 0
        ok[ok] = t[ok] - times[idx[ok]] <= FIO2_LOOKBACK
        fio2[ok] = charted.to_numpy()[idx[ok]]

    lab = stay.select("labs", "fio2_lab")
    if not lab.empty:
        v = lab["value_num"].astype(float)
        frac = (
            (v / 100).where((v > 20) & (v <= 100)).fillna(v.where((v > 0.2) & (v <= 1)))
        )
        lab_fio2 = frac.groupby(lab["t"].to_numpy()).last().dropna()
        same = lab_fio2.reindex(t).to_numpy()
        fio2 = np.where(np.isnan(same), fio2, same)

    return pd.DataFrame(
        {
            "t": t,
            "pf": po2.to_numpy() / fio2,
            "vent": in_invasive_episode(episodes, t),
            "unknown": per_time["unknown"].to_numpy(dtype=float),
        }
    ).dropna(subset=["pf"])


def respiratory_tracks(stay: Stay, episodes: pd.DataFrame, pf: pd.DataFrame) -> dict:
    """``ventilation``: the most supportive status among the episodes (section
    6c) overlapping the hour, None where no episode does. ``fio2``: latest
    charted FiO2 (fraction) within 4 h. ``pf_ratio``: latest P/F within 12 h;
    ``pf_specimen_unknown``: 1 when that P/F comes from a pO2 of unknown
    specimen, 0 when from an arterial one, NaN without a P/F (pf_ratios)."""
    names = np.array([None, *STATUSES], dtype=object)
    rows, codes = stay.overlapping(
        episodes["start"].to_numpy(),
        episodes["end"].to_numpy(),
        episodes["status"].to_numpy(),
    )
    level = stay.reduce_rows(rows, codes, "max")
    ventilation = names[np.nan_to_num(level, nan=0).astype(int)]
    fio2 = fio2_per_time(stay)
    return {
        "ventilation": ventilation,
        "fio2": stay.latest(fio2.index.to_numpy(), fio2.to_numpy(), FIO2_LOOKBACK),
        "pf_ratio": stay.latest(pf["t"].to_numpy(), pf["pf"].to_numpy(), PF_CARRY),
        "pf_specimen_unknown": stay.latest(
            pf["t"].to_numpy(), pf["unknown"].to_numpy(), PF_CARRY
        ),
    }
