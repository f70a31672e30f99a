"""Checkpoint labels of the CodeClinic surveillance companion (spec section 10):
at t = 0, 4, ..., 48 h after ICU admission (or up to discharge), which of the
findings of eight families are active, and the decision they imply.

Every checkpoint is computed from the events recorded strictly before it: the
concept tracks (windows.concepts) are computed again from the events with
``time < intime + t`` (an interval record's end clipped to that moment), so no
later event can change a checkpoint. Definitions cite
/work/shared/CLINICAL_CONCEPTS.md (sections) and spec section 10.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from windows.concepts.columns import VASOACTIVE_DRUGS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

# numpy, pandas and the concept tracks are imported by the functions that compute:
# the web's pages name the findings (FAMILIES, FINDINGS) and read checkpoints
# back from the cache without them.

CHECKPOINT_STEP_HOURS = 4
HORIZON_HOURS = 48

FAMILIES = (
    "infection",
    "sepsis",
    "renal",
    "respiratory",
    "hemodynamic",
    "neurologic",
    "metabolic",
    "coagulation",
)
PRIORITIES = ("low", "medium", "high")
ACTIONS = ("continue_monitoring", "escalate")

# How far back a current-evidence finding looks for its latest value, on top
# of what the track itself carries (labs: 12 h / 24 h, CRRT: 6 h).
GCS_LOOKBACK_HOURS = 6  # a previous GCS row is used only if < 6 h old (2)


def checkpoint_hours(length_hours: float) -> list[int]:
    """The checkpoints of a stay of ``length_hours``: every 4 h from admission
    up to 48 h, and none after discharge (spec section 10)."""
    last = min(HORIZON_HOURS, length_hours)
    return [t for t in range(0, HORIZON_HOURS + 1, CHECKPOINT_STEP_HOURS) if t <= last]


@dataclass(frozen=True)
class Evidence:
    """A track value a finding rests on: the track, the hour (since ICU
    admission, end of the hour row) and its value."""

    track: str
    hour: float
    value: float | str

    def as_dict(self) -> dict:
        value = self.value
        if isinstance(value, float):
            value = round(value, 4)
        return {"track": self.track, "hour": self.hour, "value": value}


@dataclass(frozen=True)
class Finding:
    name: str
    family: str
    level: str  # "suspected" or "alert"
    temporal: str  # "monotonic" or "current"
    definition: str
    evidence: tuple[Evidence, ...] = ()

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "family": self.family,
            "level": self.level,
            "temporal": self.temporal,
            "evidence": [e.as_dict() for e in self.evidence],
        }


@dataclass
class Checkpoint:
    """The decision at one checkpoint and the findings behind it."""

    hours_since_admit: int
    findings: list[Finding] = field(default_factory=list)

    @property
    def suspected_conditions(self) -> list[str]:
        return sorted(f.name for f in self.findings if f.level == "suspected")

    @property
    def alerts(self) -> list[str]:
        return sorted(f.name for f in self.findings if f.level == "alert")

    @property
    def global_action(self) -> str:
        """Escalate iff there is an alert (spec section 10)."""
        return "escalate" if self.alerts else "continue_monitoring"

    @property
    def priority(self) -> str:
        """high with an alert, medium with a suspected condition only, else low."""
        if self.alerts:
            return "high"
        return "medium" if self.suspected_conditions else "low"

    def decision(self) -> dict:
        return {
            "suspected_conditions": self.suspected_conditions,
            "alerts": self.alerts,
            "global_action": self.global_action,
            "priority": self.priority,
        }

    def as_dict(self) -> dict:
        return {
            "hours_since_admit": self.hours_since_admit,
            **self.decision(),
            "findings": [f.as_dict() for f in self.findings],
        }


class _Tracks:
    """The tracks of one checkpoint, computed from the events before it, read
    up to and including the checkpoint's hour row.

    Each track is read once into arrays of the hours and values where it is
    known (NaN, None: unknown): the rules read the same tracks several times,
    and pandas' per-call cost on a 13-72-row frame was most of an evaluation."""

    def __init__(self, frame: pd.DataFrame, t: int):
        hours = frame["hour"].to_numpy()
        self._rows = hours <= t
        self._hours = hours[self._rows]
        self._frame = frame
        self._known: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.t = t

    def known(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The hours so far at which ``name`` is known, and its values there."""
        if name not in self._known:
            import numpy as np
            import pandas as pd

            if name in self._frame:
                values = self._frame[name].to_numpy()[self._rows]
                present = ~pd.isna(values)
                self._known[name] = (self._hours[present], values[present])
            else:
                self._known[name] = (self._hours[:0], np.empty(0))
        return self._known[name]

    def latest(self, name: str, lookback: float) -> Evidence | None:
        """The latest known value of ``name`` in rows (t - lookback, t]."""
        import numpy as np

        hours, values = self.known(name)
        recent = np.flatnonzero(hours > self.t - lookback)
        if not len(recent):
            return None
        i = recent[-1]
        return Evidence(name, float(hours[i]), _plain(values[i]))

    def now(self, name: str) -> Evidence | None:
        """The value of the checkpoint's own hour row (tracks that carry their
        value forward by their own rule: labs, P/F, CRRT, vasoactive rates)."""
        return self.latest(name, 1)

    def first_at_least(self, name: str, threshold: float) -> Evidence | None:
        """The first row so far with ``name`` >= threshold (monotonic findings)."""
        import numpy as np

        hours, values = self.known(name)
        hits = np.flatnonzero(values >= threshold)
        if not len(hits):
            return None
        i = hits[0]
        return Evidence(name, float(hours[i]), _plain(values[i]))


def _plain(value):
    import numpy as np

    if isinstance(value, (np.floating, float, np.integer, int)):
        return float(value)
    return str(value)


Rule = Callable[[_Tracks], tuple[Evidence, ...] | None]


def _suspected_infection(tr: _Tracks):
    """Suspicion of infection, monotonic: active from the first hour the
    antibiotic/culture pairing is documented (CLINICAL_CONCEPTS.md 10b)."""
    ev = tr.first_at_least("suspected_infection", 1)
    return (ev,) if ev else None


def _sepsis(tr: _Tracks):
    """Sepsis-3, monotonic: suspicion of infection with a 24-h SOFA >= 2 in
    [onset - 48 h, onset + 24 h] (CLINICAL_CONCEPTS.md 10c)."""
    ev = tr.first_at_least("sepsis3", 1)
    return (ev,) if ev else None


def _vasoactive(tr: _Tracks) -> tuple[Evidence, ...]:
    found = []
    for drug in VASOACTIVE_DRUGS:
        ev = tr.now(drug)
        if ev is not None and isinstance(ev.value, float) and ev.value > 0:
            found.append(ev)
    return tuple(found)


def _lactate_over(tr: _Tracks, threshold: float, strict: bool) -> Evidence | None:
    ev = tr.now("lactate")
    if ev is None:
        return None
    hit = ev.value > threshold if strict else ev.value >= threshold
    return ev if hit else None


def _shock(tr: _Tracks):
    """Shock, current: a vasoactive agent running at the checkpoint
    (CLINICAL_CONCEPTS.md 5) and a current lactate > 2 mmol/L (7), the
    circulatory criteria of Sepsis-3 septic shock (Singer et al. 2016) without
    the infection."""
    drugs = _vasoactive(tr)
    lactate = _lactate_over(tr, 2.0, strict=True)
    if drugs and lactate:
        return (*drugs, lactate)
    return None


def _septic_shock(tr: _Tracks):
    """Septic shock: Sepsis-3 (CLINICAL_CONCEPTS.md 10c) with shock now (a
    vasoactive agent running and lactate > 2 mmol/L; Singer et al. 2016)."""
    sepsis = _sepsis(tr)
    shock = _shock(tr)
    if sepsis and shock:
        return (*sepsis, *shock)
    return None


def _worst_aki(tr: _Tracks) -> Evidence | None:
    """The worst KDIGO stage so far (max of creatinine, urine and CRRT stages,
    CLINICAL_CONCEPTS.md 4d), kept once reached."""
    hours, stages = tr.known("aki_stage")
    if not len(stages) or stages.max() < 1:
        return None
    worst = stages.max()
    hour = hours[stages == worst][0]
    return Evidence("aki_stage", float(hour), float(worst))


def _aki_stage(stage: int) -> Rule:
    def rule(tr: _Tracks):
        ev = _worst_aki(tr)
        return (ev,) if ev is not None and ev.value == stage else None

    rule.__doc__ = (
        f"AKI, worst KDIGO stage so far = {stage}, monotonic (CLINICAL_CONCEPTS.md "
        "4b-4d: creatinine, urine output, CRRT)."
    )
    return rule


def _oliguria(tr: _Tracks):
    """Oliguria, current: urine output over the trailing 6 h < 0.5 mL/kg/h at
    the checkpoint (the KDIGO stage 1 urine criterion, CLINICAL_CONCEPTS.md
    3b, 4c); unknown without weight or chartings."""
    ev = tr.now("urine_ml_kg_h")
    return (ev,) if ev is not None and ev.value < 0.5 else None


def _crrt(tr: _Tracks):
    """CRRT, current: a running CRRT charting within 6 h or a CRRT interval at
    the checkpoint (CLINICAL_CONCEPTS.md 11a, 11b); active support, not a
    permanent state."""
    ev = tr.now("crrt_active")
    return (ev,) if ev is not None and ev.value >= 1 else None


def _ventilation(tr: _Tracks) -> Evidence | None:
    """The ventilation status at the checkpoint's hour: the track carries each
    charting up to 14 h itself (windows.concepts.respiratory,
    CLINICAL_CONCEPTS.md 6c), so a second look-back here would carry it twice."""
    return tr.now("ventilation")


def _invasive_ventilation(tr: _Tracks):
    """Invasive ventilation, current: the ventilation status at the checkpoint
    (a charting carried up to 14 h) is invasive (CLINICAL_CONCEPTS.md 6b, 6c);
    alert-level."""
    ev = _ventilation(tr)
    return (ev,) if ev is not None and ev.value == "invasive" else None


def _noninvasive_support(tr: _Tracks):
    """HFNC/NIV support escalation, current: the ventilation status at the
    checkpoint (a charting carried up to 14 h) is high-flow nasal cannula or
    non-invasive ventilation (CLINICAL_CONCEPTS.md 6b, 6c)."""
    ev = _ventilation(tr)
    return (ev,) if ev is not None and ev.value in ("hfnc", "niv") else None


def _hypoxemia(tr: _Tracks):
    """Hypoxemia, current: a PaO2/FiO2 < 300 mmHg from an arterial gas of the
    last 12 h (CLINICAL_CONCEPTS.md 7; the SOFA respiration 2 cut-off, 9b)."""
    ev = tr.now("pf_ratio")
    return (ev,) if ev is not None and ev.value < 300 else None


def _vasoactive_support(tr: _Tracks):
    """Vasoactive support, current: any of the seven vasoactive agents running
    at the checkpoint (CLINICAL_CONCEPTS.md 5); a strong instability signal."""
    return _vasoactive(tr) or None


def _hypotension(tr: _Tracks):
    """Hypotension, current: the lowest MAP charted in the checkpoint's hour
    < 65 mmHg (MAP as CLINICAL_CONCEPTS.md 1, 9a; 65 mmHg is the MAP target of
    Sepsis-3 septic shock, Singer et al. 2016)."""
    ev = tr.now("map_min")
    return (ev,) if ev is not None and ev.value < 65 else None


def _gcs_at_most(limit: float) -> Rule:
    def rule(tr: _Tracks):
        ev = tr.latest("gcs", GCS_LOOKBACK_HOURS)
        return (ev,) if ev is not None and ev.value <= limit else None

    return rule


_depressed_consciousness = _gcs_at_most(12)
_depressed_consciousness.__doc__ = (
    "Depressed consciousness, current: the latest GCS of the last 6 h <= 12 "
    "(SOFA CNS >= 2, CLINICAL_CONCEPTS.md 2, 9b)."
)
_severe_neurologic = _gcs_at_most(8)
_severe_neurologic.__doc__ = (
    "Severe neurologic deterioration, current: the latest GCS of the last 6 h "
    "<= 8 (spec section 10; GCS rules CLINICAL_CONCEPTS.md 2)."
)


def _threshold(track: str, limit: float, op: str, doc: str) -> Rule:
    def rule(tr: _Tracks):
        ev = tr.now(track)
        if ev is None or not isinstance(ev.value, float):
            return None
        hit = {
            ">=": ev.value >= limit,
            "<": ev.value < limit,
            "<=": ev.value <= limit,
        }[op]
        return (ev,) if hit else None

    rule.__doc__ = doc
    return rule


@dataclass(frozen=True)
class FindingSpec:
    name: str
    family: str
    level: str
    temporal: str
    rule: Rule


def _spec(name, family, level, temporal, rule) -> FindingSpec:
    return FindingSpec(name, family, level, temporal, rule)


# The findings, their family, level (suspected condition or alert) and
# temporal semantics (spec section 10). Each rule's docstring is its definition.
FINDINGS: tuple[FindingSpec, ...] = (
    _spec(
        "suspected_infection",
        "infection",
        "suspected",
        "monotonic",
        _suspected_infection,
    ),  # fmt: skip
    _spec("sepsis", "sepsis", "alert", "monotonic", _sepsis),
    _spec("septic_shock", "sepsis", "alert", "current", _septic_shock),
    _spec("aki_stage_1", "renal", "suspected", "monotonic", _aki_stage(1)),
    _spec("aki_stage_2", "renal", "suspected", "monotonic", _aki_stage(2)),
    _spec("aki_stage_3", "renal", "alert", "monotonic", _aki_stage(3)),
    _spec("oliguria", "renal", "suspected", "current", _oliguria),
    _spec("crrt", "renal", "alert", "current", _crrt),
    _spec("hypoxemia", "respiratory", "suspected", "current", _hypoxemia),
    _spec(
        "noninvasive_support",
        "respiratory",
        "suspected",
        "current",
        _noninvasive_support,
    ),  # fmt: skip
    _spec(
        "invasive_ventilation", "respiratory", "alert", "current", _invasive_ventilation
    ),  # fmt: skip
    _spec("hypotension", "hemodynamic", "suspected", "current", _hypotension),
    _spec(
        "vasoactive_support", "hemodynamic", "alert", "current", _vasoactive_support
    ),  # fmt: skip
    _spec("shock", "hemodynamic", "alert", "current", _shock),
    _spec(
        "depressed_consciousness",
        "neurologic",
        "suspected",
        "current",
        _depressed_consciousness,
    ),  # fmt: skip
    _spec(
        "severe_neurologic_deterioration",
        "neurologic",
        "alert",
        "current",
        _severe_neurologic,
    ),  # fmt: skip
    _spec(
        "hyperlactatemia",
        "metabolic",
        "suspected",
        "current",
        _threshold(
            "lactate",
            2.0,
            ">=",
            "Hyperlactatemia (metabolic stress), current: lactate >= 2 mmol/L within "
            "12 h (spec section 10; CLINICAL_CONCEPTS.md 7).",
        ),
    ),  # fmt: skip
    _spec(
        "severe_hyperlactatemia",
        "metabolic",
        "alert",
        "current",
        _threshold(
            "lactate",
            4.0,
            ">=",
            "Severe hyperlactatemia, current: lactate >= 4 mmol/L within 12 h (spec "
            "section 10; CLINICAL_CONCEPTS.md 7).",
        ),
    ),  # fmt: skip
    _spec(
        "acidemia",
        "metabolic",
        "suspected",
        "current",
        _threshold(
            "ph",
            7.30,
            "<",
            "Acidemia, current: arterial pH < 7.30 within 12 h (spec section 10; "
            "CLINICAL_CONCEPTS.md 7).",
        ),
    ),  # fmt: skip
    _spec(
        "severe_acidemia",
        "metabolic",
        "alert",
        "current",
        _threshold(
            "ph",
            7.20,
            "<=",
            "Severe acidemia, current: arterial pH <= 7.20 within 12 h (spec section "
            "10; CLINICAL_CONCEPTS.md 7).",
        ),
    ),  # fmt: skip
    _spec(
        "coagulopathy",
        "coagulation",
        "suspected",
        "current",
        _threshold(
            "inr",
            1.5,
            ">=",
            "Coagulopathy, current: INR >= 1.5 within 24 h (spec section 10; "
            "CLINICAL_CONCEPTS.md 8).",
        ),
    ),  # fmt: skip
    _spec(
        "severe_coagulopathy",
        "coagulation",
        "alert",
        "current",
        _threshold(
            "inr",
            2.0,
            ">=",
            "Severe coagulopathy, current: INR >= 2.0 within 24 h (spec section 10; "
            "CLINICAL_CONCEPTS.md 8).",
        ),
    ),  # fmt: skip
)
SUSPECTED_NAMES = tuple(s.name for s in FINDINGS if s.level == "suspected")
ALERT_NAMES = tuple(s.name for s in FINDINGS if s.level == "alert")


def checkpoint_evaluate(frame: pd.DataFrame, t: int) -> Checkpoint:
    """The checkpoint at hour ``t`` from tracks computed on the events before
    it (``frame`` from compute_stay_tracks)."""
    tracks = _Tracks(frame, t)
    point = Checkpoint(hours_since_admit=t)
    for spec in FINDINGS:
        evidence = spec.rule(tracks)
        if evidence:
            point.findings.append(
                Finding(
                    name=spec.name,
                    family=spec.family,
                    level=spec.level,
                    temporal=spec.temporal,
                    definition=(spec.rule.__doc__ or "").strip(),
                    evidence=tuple(evidence),
                )
            )
    return point


def stay_checkpoints(
    events: pd.DataFrame,
    *,
    intime: pd.Timestamp,
    outtime: pd.Timestamp,
    weight_kg: float | None = None,
) -> list[Checkpoint]:
    """The checkpoints of one stay from its admission's events (the input of
    compute_stay_tracks). Each is computed from the events strictly before it.

    Whether the source records cultures at all is a property of the data set,
    not of the patient's course, so it is read from all events once: without
    it, suspicion of infection before the first culture would read as unknown
    rather than absent."""
    import pandas as pd

    from windows.concepts import tracks_for
    from windows.concepts.grid import prepare_stay

    intime = pd.Timestamp(intime)
    outtime = pd.Timestamp(outtime)
    length = (outtime - intime).total_seconds() / 3600.0
    hours = checkpoint_hours(length)
    if not hours:
        return []
    cultures = (
        bool((events["domain"] == "microbiology_culture").any())
        if len(events)
        else False
    )
    # The events are prepared once (grid.prepare_stay, up to the last
    # checkpoint); each checkpoint's stay is the part of them recorded before
    # it (Stay.before), as prepare_stay lays it from events_before(events, it).
    last = intime + pd.Timedelta(hours=hours[-1])
    prepared = prepare_stay(events, intime=intime, outtime=last, weight_kg=weight_kg)
    points = []
    for t in hours:
        cutoff = intime + pd.Timedelta(hours=t)
        frame = tracks_for(prepared.before(cutoff), cultures_available=cultures)
        points.append(checkpoint_evaluate(frame, t))
    return points
