"""The hindsight context of Oracle windows (spec section 7): what a labeller sees
of one window, built for many windows at once with a handful of queries per
batch (never one per window).

For each window: the stay's static facts (outcome included, the Oracle labels in
hindsight; the records coded after discharge listed apart, never among the
events at their billing date), a per-6-h summary of the whole trajectory from
the stored concept tracks (windows.tracks), the events around the window in
full, the latest key lab results before them, and the window's recorded
critical actions to rate (annotation.critical rules: the defaults, or a
campaign's).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db.models import BooleanField, Case, Q, Value, When

from annotation.critical import critical_action_q, default_critical_action_rules
from oracle.backbones.base import WindowContext
from windows.disease_groups import disease_group
from windows.event_fields import EVENT_VALUE_FIELDS
from windows.models import (
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    Outcome,
    Stay,
    StayTracks,
    Window,
)
from windows.selectors_context import HINDSIGHT_KINDS, OUTCOME_REVEALING_CATEGORIES
from windows.services import DEATH_GRACE, admission_died
from windows.tracks import events_signatures, stay_tracks_build
from windows.vocabulary import coded_code, event_label

if TYPE_CHECKING:
    import pandas as pd

# Events shown in full: this many hours before the window's start and after its
# end (hindsight: what followed the window helps to judge it).
HOURS_BEFORE = 4.0
HOURS_AFTER = 2.0
# Key labs whose latest result before the shown span is added, so a problem
# driven by a lab drawn earlier (creatinine, lactate, ...) can still be cited.
KEY_LAB_CATEGORIES = (
    "creatinine",
    "lactate",
    "ph_arterial",
    "platelet_count",
    "bilirubin_total",
    "inr",
    "po2_arterial",
    "bicarbonate",
    "potassium",
    "hemoglobin",
)
KEY_LAB_LOOKBACK_HOURS = 48.0
# Radiology reports (MIMIC-IV-Note, windows.importers.mimic.notes) stored in the
# KEY_LAB_LOOKBACK_HOURS before the shown span: the latest this many are added,
# as the key labs are, since an X-ray read hours earlier often decides the
# window's problems (ARDS, pneumonia, effusion, line position).
EARLIER_REPORTS = 2
NOTES_DOMAIN = "notes"
REPORT_CATEGORY = "radiology_report"
DISCHARGE_CATEGORY = "discharge_summary"
SUMMARY_HOURS = 6

# The per-6-h summary: concept track -> how hours are aggregated into one row.
# "mean" averages the known hours, "min"/"max"/"sum" as named, "last" the
# latest known value, "vent" the most supportive ventilation status.
SUMMARY_COLUMNS: dict[str, str] = {
    "map": "mean",
    "map_min": "min",
    "hr": "mean",
    "spo2": "mean",
    "temp": "max",
    "gcs": "min",
    "ventilation": "vent",
    "fio2": "max",
    "pf_ratio": "min",
    "ned": "max",
    "lactate": "max",
    "ph": "min",
    "creatinine": "max",
    "platelets": "min",
    "bilirubin": "max",
    "inr": "max",
    "urine_ml": "sum",
    "aki_stage": "max",
    "crrt_active": "max",
    "sofa": "max",
    "antibiotic": "max",
}
# windows.concepts.respiratory's statuses, least to most supportive (6b).
VENTILATION_ORDER = ("none", "supplemental_o2", "hfnc", "niv", "invasive")


def _number(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _aggregate(how: str, values: list):
    known = [v for v in values if _number(v) is not None]
    if not known:
        return None
    if how == "vent":
        ranked = [v for v in known if v in VENTILATION_ORDER]
        return max(ranked, key=VENTILATION_ORDER.index) if ranked else known[-1]
    if how == "mean":
        return round(sum(known) / len(known), 2)
    if how == "min":
        return min(known)
    if how == "max":
        return max(known)
    if how == "sum":
        return round(sum(known), 1)
    return known[-1]


def trajectory_summary(
    *, hours: list, columns: dict[str, list], block_hours: int = SUMMARY_HOURS
) -> list[dict]:
    """Rows of ``block_hours`` hours from ICU admission to the end of the tracks:
    ``{"from_h", "to_h", "values": {track: aggregate}}``, unknown values left out.
    A row covers the hourly rows whose hour end is in (from_h, to_h]."""
    if not hours:
        return []
    last = max(h for h in hours if h is not None)
    blocks: dict[int, list[int]] = defaultdict(list)
    for i, h in enumerate(hours):
        if h is None or h <= 0:
            continue
        blocks[(int(h) - 1) // block_hours].append(i)
    rows = []
    for b in range(0, (max(int(last), 1) - 1) // block_hours + 1):
        idx = blocks.get(b, [])
        values = {}
        for name, how in SUMMARY_COLUMNS.items():
            series = columns.get(name)
            if series is None or not idx:
                continue
            agg = _aggregate(how, [series[i] for i in idx])
            if agg is not None:
                values[name] = agg
        rows.append(
            {"from_h": b * block_hours, "to_h": (b + 1) * block_hours, "values": values}
        )
    return rows


def summary_coarsen(rows: list[dict], *, factor: int = 2) -> list[dict]:
    """Merge every ``factor`` consecutive summary rows into one (a coarser view of
    the same trajectory, for long stays). Means are averaged over the merged rows."""
    out = []
    for i in range(0, len(rows), factor):
        group = rows[i : i + factor]
        values = {}
        for name, how in SUMMARY_COLUMNS.items():
            agg = _aggregate(how, [r["values"].get(name) for r in group])
            if agg is not None:
                values[name] = agg
        out.append(
            {"from_h": group[0]["from_h"], "to_h": group[-1]["to_h"], "values": values}
        )
    return out


def _signatures(stays: list[Stay]) -> dict[int, str]:
    """windows.tracks.events_signature of many stays in one query."""
    return events_signatures(stays=stays)


def _stay_tracks(stays: list[Stay]) -> dict[int, StayTracks]:
    """Current stored tracks of each stay (windows.tracks.stay_tracks_get, batched:
    two queries for all stays, a rebuild only where the events changed)."""
    signatures = _signatures(stays)
    stored = {t.stay_id: t for t in StayTracks.objects.filter(stay__in=stays)}
    out = {}
    for stay in stays:
        tracks = stored.get(stay.pk)
        if tracks is None or tracks.events_signature != signatures[stay.pk]:
            tracks = stay_tracks_build(stay=stay, signature=signatures[stay.pk])
        out[stay.pk] = tracks
    return out


def _static(stay: Stay, tracks: StayTracks) -> dict:
    admission = stay.admission
    patient = admission.patient
    group = stay.disease_group
    if group == DiseaseGroup.UNKNOWN and stay.diagnosis_code:
        group = disease_group(stay.diagnosis_code, stay.diagnosis_version)
    meta = tracks.meta or {}
    sepsis = meta.get("sepsis3") or {}
    onset = sepsis.get("onset") if isinstance(sepsis, dict) else None
    onset_h = None
    if onset:
        import pandas as pd

        onset_h = round(
            (pd.Timestamp(onset) - pd.Timestamp(stay.intime)).total_seconds() / 3600, 1
        )
    return {
        "age": admission.age_at_admission or patient.age,
        "sex": patient.sex,
        # Coded after discharge (the billed primary diagnosis): the prompt says so.
        "admission_diagnosis": stay.admission_diagnosis,
        "diagnosis_code": stay.diagnosis_code,
        "disease_group": DiseaseGroup(group).label,
        "admission_type": admission.admission_type,
        "care_unit": stay.care_unit,
        "stay_hours": round(stay.length_hours, 1),
        "hospital_outcome": stay.hospital_outcome,
        "discharge_disposition": admission.discharge_disposition,
        "weight_kg": meta.get("weight_kg"),
        "sepsis3_onset_h": onset_h,
    }


def _death_times(stays: list[Stay]) -> dict[int, object]:
    """When each admission's patient died in hospital, by admission id, for the
    stays that died (Stay.hospital_outcome): the admission's death outcome event
    (windows.services.outcome_events_frame: MIMIC-IV's deathtime, CLIF's
    death_dttm), else the patient's death time when it falls in the admission
    (with windows.services.DEATH_GRACE), else the discharge time of an admission
    whose disposition says expired. An admission without any is left out."""
    died = {
        s.admission_id: s.admission for s in stays if s.hospital_outcome == Outcome.DIED
    }
    if not died:
        return {}
    out: dict[int, object] = {}
    for admission_id, time in (
        Event.objects.filter(
            admission_id__in=list(died),
            kind=EventKind.OUTCOME,
            domain=Domain.OUTCOME,
            category="death",
        )
        .order_by("admission_id", "time")
        .values_list("admission_id", "time")
    ):
        out.setdefault(admission_id, time)
    for admission_id, admission in died.items():
        if admission_id in out:
            continue
        death = admission.patient.death_time
        if (
            death is not None
            and admission.discharge_time is not None
            and admission.admit_time <= death <= admission.discharge_time + DEATH_GRACE
        ):
            out[admission_id] = death
        elif admission.discharge_time is not None and admission_died(
            admission=admission, death_time=None
        ):
            out[admission_id] = admission.discharge_time
    return out


def _hours_since(time, stay: Stay) -> float | None:
    if time is None:
        return None
    return round((time - stay.intime).total_seconds() / 3600, 3)


def _coded_records(
    admission_ids: set[int],
) -> tuple[dict[int, list[dict]], dict[int, list[dict]]]:
    """The records coded after discharge of each admission, as the prompt lists
    them apart: billing date, code system, code and title; and its discharge
    summaries (written at discharge: hindsight, whole text), ``{"written",
    "text"}``. One query. Neither carries an event id: a label's evidence cites
    what was charted at the bedside."""
    out: dict[int, list[dict]] = defaultdict(list)
    summaries: dict[int, list[dict]] = defaultdict(list)
    rows = (
        Event.objects.filter(
            Q(kind=EventKind.CODED)
            | Q(domain=NOTES_DOMAIN, category=DISCHARGE_CATEGORY),
            admission_id__in=admission_ids,
        )
        .order_by("admission_id", "time", "category", "value_text", "id")
        .values_list("admission_id", "time", "category", "name", "value_text", "kind")
    )
    for admission_id, time, system, name, code, kind in rows:
        if kind != EventKind.CODED:
            summaries[admission_id].append(
                {"written": time.strftime("%Y-%m-%d %H:%M"), "text": code}
            )
            continue
        parts = coded_code(system, code or name)
        out[admission_id].append(
            {
                "date": time.date().isoformat(),
                "system": parts.system,
                "code": parts.code,
                "title": parts.title,
            }
        )
    return out, summaries


def _tracks_frame(tracks: StayTracks) -> pd.DataFrame:
    # pandas only where a context is built (a worker's Oracle run): the web's
    # pages import this module through oracle.prompts without it (issue 35).
    import pandas as pd

    frame = pd.DataFrame(
        tracks.columns or {}, index=pd.Index(tracks.hours, name="hour")
    )
    return frame


def _merged_spans(spans: list[tuple]) -> list[tuple]:
    spans = sorted(spans)
    merged: list[list] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [tuple(s) for s in merged]


_EVENT_FIELDS = ("id", "admission_id", "time", "end_time", *EVENT_VALUE_FIELDS)


def _event_dict(row: tuple, intime) -> dict:
    (pk, _adm, time, end_time, kind, domain, category, name, value, unit, text) = row
    label = event_label(domain=domain, category=category, name=name, unit=unit)
    event = {
        "id": pk,
        "time": time,
        "hours": round((time - intime).total_seconds() / 3600.0, 2),
        "kind": kind,
        "domain": domain,
        "category": category,
        "name": name,
        # How the prompt names it: the concept, and the source label where it
        # adds to it (windows.vocabulary); the unit is the value's.
        "concept": label.concept,
        # A note is named by its exam (windows.importers.mimic.notes).
        "detail": (
            name if domain == NOTES_DOMAIN and name != label.concept else label.detail
        ),
        "value": None if value is None else round(value, 3),
        "unit": label.unit,
        "text": text,
    }
    if end_time is not None:
        event["end_hours"] = round((end_time - intime).total_seconds() / 3600.0, 2)
    return event


def window_contexts_build(
    *,
    windows: list[Window],
    critical_rules: list[dict] | None = None,
    hours_before: float = HOURS_BEFORE,
    hours_after: float = HOURS_AFTER,
) -> list[WindowContext]:
    """The WindowContext of each window, in the order given.

    Queries per batch, whatever its size: the stays, the tracks' event
    signatures, the stored tracks (recomputed only for stays whose events
    changed), the events around every window (one query over the merged time
    spans, the critical-action rule evaluated in SQL), and the key labs.

    ``critical_rules``: the rules of annotation.critical that say which recorded
    actions are rated (a campaign's ``critical_action_categories``); the
    defaults when None. ``events`` of a context holds, by time, the key labs'
    latest results before the shown span (``"latest_before": True``) and every
    event from ``hours_before`` before the window's start to ``hours_after``
    after its end, outcome events and coded records left out, and the latest
    EARLIER_REPORTS radiology reports stored in the 48 h before that span
    (``"latest_before": True`` too); ``allowed_event_ids`` are their ids.
    ``static["coded_after_discharge"]`` lists the admission's coded records and
    ``static["discharge_summaries"]`` its discharge summaries, written at
    discharge (no ids: not citable).
    """
    if not windows:
        return []
    rules = (
        default_critical_action_rules() if critical_rules is None else critical_rules
    )
    stays = {
        s.pk: s
        for s in Stay.objects.select_related("admission__patient").filter(
            pk__in={w.stay_id for w in windows}
        )
    }
    stay_list = list(stays.values())
    tracks_by_stay = _stay_tracks(stay_list)
    frames = {pk: _tracks_frame(t) for pk, t in tracks_by_stay.items()}
    summaries = {
        pk: trajectory_summary(hours=t.hours, columns=t.columns)
        for pk, t in tracks_by_stay.items()
    }
    coded, discharge = _coded_records({s.admission_id for s in stay_list})
    deaths = _death_times(stay_list)
    statics = {
        pk: {
            **_static(stays[pk], tracks_by_stay[pk]),
            # Hours from ICU admission to death (hindsight; the rules Oracle's
            # death guard reads it), None when unknown or survived.
            "death_h": _hours_since(deaths.get(stays[pk].admission_id), stays[pk]),
            "coded_after_discharge": coded.get(stays[pk].admission_id, []),
            "discharge_summaries": discharge.get(stays[pk].admission_id, []),
        }
        for pk in stays
    }

    before = timedelta(hours=hours_before)
    after = timedelta(hours=hours_after)
    spans_by_admission: dict[int, list[tuple]] = defaultdict(list)
    for w in windows:
        adm = stays[w.stay_id].admission_id
        spans_by_admission[adm].append((w.start - before, w.end + after))
    span_q = Q(pk__in=[])
    lab_q = Q(pk__in=[])
    for adm, spans in spans_by_admission.items():
        merged = _merged_spans(spans)
        for start, end in merged:
            span_q |= Q(admission_id=adm, time__gte=start, time__lt=end)
        lab_q |= Q(
            admission_id=adm,
            time__gte=merged[0][0] - timedelta(hours=KEY_LAB_LOOKBACK_HOURS),
            time__lt=merged[-1][1],
        )
    # Coded records are not events of the timeline: they go to the static
    # context, marked as coded after discharge (_coded_records).
    visible = ~Q(kind__in=HINDSIGHT_KINDS) & ~Q(
        category__in=OUTCOME_REVEALING_CATEGORIES
    )
    rows = list(
        Event.objects.filter(span_q & visible)
        .annotate(
            is_critical=Case(
                When(critical_action_q(rules), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )
        .order_by("admission_id", "time", "id")
        .values_list(*_EVENT_FIELDS, "is_critical")
    )
    # The key labs and the radiology reports before the span, in one query.
    anchor_rows = list(
        Event.objects.filter(
            lab_q,
            Q(domain="labs", category__in=KEY_LAB_CATEGORIES, value_num__isnull=False)
            | Q(
                domain=NOTES_DOMAIN,
                category=REPORT_CATEGORY,
                kind=EventKind.OBSERVATION,
            ),
        )
        .order_by("admission_id", "time", "id")
        .values_list(*_EVENT_FIELDS)
    )
    lab_rows = [r for r in anchor_rows if r[5] != NOTES_DOMAIN]
    reports_by_adm: dict[int, list[tuple]] = defaultdict(list)
    for row in anchor_rows:
        if row[5] == NOTES_DOMAIN:
            reports_by_adm[row[1]].append(row)

    events_by_adm: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        events_by_adm[row[1]].append(row)
    labs_by_adm: dict[int, list[tuple]] = defaultdict(list)
    for row in lab_rows:
        labs_by_adm[row[1]].append(row)
    times_by_adm = {a: [r[2] for r in rs] for a, rs in events_by_adm.items()}
    lab_times_by_adm = {a: [r[2] for r in rs] for a, rs in labs_by_adm.items()}
    # Event dicts are built once per (stay, event) and shared by the contexts of
    # overlapping windows; nothing downstream mutates them.
    built: dict[tuple[int, int], dict] = {}

    def as_dict(stay: Stay, row: tuple) -> dict:
        key = (stay.pk, row[0])
        event = built.get(key)
        if event is None:
            event = _event_dict(row[:11], stay.intime)
            built[key] = event
        return event

    contexts = []
    for w in windows:
        stay = stays[w.stay_id]
        adm = stay.admission_id
        span_start, span_end = w.start - before, w.end + after
        adm_rows = events_by_adm.get(adm, [])
        times = times_by_adm.get(adm, [])
        lo = bisect.bisect_left(times, span_start)
        hi = bisect.bisect_left(times, span_end)
        shown = adm_rows[lo:hi]
        events = []
        recorded = []
        for row in shown:
            event = as_dict(stay, row)
            events.append(event)
            if row[11] and w.start <= row[2] < w.end:
                recorded.append(event)
        shown_ids = {e["id"] for e in events}
        lab_rows_adm = labs_by_adm.get(adm, [])
        lab_times = lab_times_by_adm.get(adm, [])
        cut = bisect.bisect_left(lab_times, span_start)
        floor = span_start - timedelta(hours=KEY_LAB_LOOKBACK_HOURS)
        latest: dict[str, tuple] = {}
        for row in reversed(lab_rows_adm[:cut]):
            if row[2] < floor:
                break
            if row[6] not in latest:
                latest[row[6]] = row
            if len(latest) == len(KEY_LAB_CATEGORIES):
                break
        earlier = [
            row for row in reports_by_adm.get(adm, []) if floor <= row[2] < span_start
        ][-EARLIER_REPORTS:]
        anchors = []
        for row in sorted([*latest.values(), *earlier], key=lambda r: (r[2], r[0])):
            if row[0] in shown_ids:
                continue
            anchors.append({**as_dict(stay, row), "latest_before": True})
        contexts.append(
            WindowContext(
                window_id=w.pk,
                stay_id=stay.pk,
                window_index=w.index,
                start=w.start,
                end=w.end,
                hours_since_admit=w.hours_since_admit,
                static=statics[stay.pk],
                summary=summaries[stay.pk],
                events=anchors + events,
                recorded_actions=recorded,
                tracks=frames[stay.pk],
                allowed_event_ids=frozenset(shown_ids | {a["id"] for a in anchors}),
            )
        )
    return contexts


__all__ = [
    "HOURS_AFTER",
    "HOURS_BEFORE",
    "SUMMARY_COLUMNS",
    "summary_coarsen",
    "trajectory_summary",
    "window_contexts_build",
]
