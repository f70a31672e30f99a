"""No leaks over whole releases built from the CLIF demo: a Scale release of
every candidate window (Oracle labels as rows) and a Gold release from a small
campaign with real consensus. For every window, its context (the stay file's
events before the window's end) holds no outcome-revealing event and no record
coded after discharge, the stay file nothing past the stay's last window end,
the window's own actions are listed for removal, and no window record or
context line holds a procedure or diagnosis code. Clinical notes (issue 21) are
added to the demo's admissions: radiology reports every 8 h to past each
stay's end, a discharge summary per admission; no context holds a discharge
summary, nor a report stored at or after its window's end."""

import json
from collections import defaultdict

import pytest
from django.db.models import Min
from realicu_client import iterate_windows

from agents.context import stay_contexts
from exports.building import release_build
from exports.models import ReleaseKind
from exports.services import release_create
from tests.bedside_reference import (
    BEDSIDE_STATIC_KEYS,
    BedsideReference,
    add_events_at_window_ends,
)
from tests.factories import DISCHARGE_SUMMARY, RADIOLOGY_REPORT
from windows.importers.clif import clif_import
from windows.models import Admission, Domain, Event, EventKind, Stay, Window
from windows.selectors_context import OUTCOME_REVEALING_CATEGORIES
from windows.windowing import windows_build_many

from .helpers import make_oracle_run, oracle_payload

pytestmark = pytest.mark.django_db


def _strings(value):
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _evidence_ids(labels: dict):
    """Every event id a window's labels cite."""
    yield from labels["status"]["evidence"]
    for task in ("acute_problems", "recommended_actions", "red_flags"):
        for item in labels[task]:
            yield from item["evidence"]


def _assert_no_coded_record(folder, records):
    """No context line is a coded record and none names one; no window record
    cites, rates or names one; no admission diagnosis code either."""
    coded = list(
        Event.objects.filter(kind=EventKind.CODED).values_list(
            "id", "name", "value_text"
        )
    )
    assert len(coded) > 500  # the demo's patient_procedures
    coded_ids = {pk for pk, _, _ in coded}
    codes = {code for _, _, code in coded} | {name for _, name, _ in coded}
    diagnosis_codes = {
        dx["code"] for a in Admission.objects.all() for dx in a.diagnoses or []
    }
    stay_diagnoses = set(Stay.objects.values_list("admission_diagnosis", flat=True))
    forbidden = codes | diagnosis_codes | (stay_diagnoses - {""})
    for path in sorted((folder / "context").glob("*.jsonl")):
        for line in open(path, encoding="utf-8"):
            row = json.loads(line)
            assert row["event_id"] not in coded_ids
            assert row["kind"] in ("observation", "action")
            assert row["category"] not in ("ICD9", "ICD10PCS", "CPT", "HCPCS")
            leaked = [t for t in _strings(row) if t in forbidden]
            assert not leaked, (path.name, row)
    for record in records:
        assert not coded_ids & set(_evidence_ids(record["labels"])), record["window_id"]
        assert not coded_ids & set(record["window_action_event_ids"])
        leaked = [
            t
            for t in _strings(record)
            if t in forbidden or any(n in t for n in codes if " " in n)
        ]
        assert not leaked, (record["window_id"], leaked)


DISCHARGE_MARK = "DISCHARGE-SUMMARY-TEXT"


def _add_notes() -> int:
    """Radiology reports every 8 h from each admission's first ICU stay to 12 h
    past its last (some after every window's end), and a discharge summary at
    the last stay's end plus a day, as MIMIC-IV-Note's import makes them
    (windows.importers.mimic.notes); the number of reports."""
    from datetime import timedelta

    rows = []
    for admission in Admission.objects.prefetch_related("stays"):
        stays = list(admission.stays.all())
        if not stays:
            continue
        first = min(s.intime for s in stays)
        last = max(s.outtime for s in stays)
        time, n = first, 0
        while time < last + timedelta(hours=12):
            n += 1
            rows.append(
                Event(
                    admission=admission,
                    time=time,
                    **RADIOLOGY_REPORT,
                    value_text=f"FINDINGS: report {n} at {time.isoformat()}.",
                    source_key=f"{admission.pk}-RR-{n}",
                )
            )
            time += timedelta(hours=8, minutes=7)
        rows.append(
            Event(
                admission=admission,
                time=last + timedelta(days=1),
                **DISCHARGE_SUMMARY,
                value_text=f"{DISCHARGE_MARK} Discharge Disposition: Expired",
                source_key=f"{admission.pk}-DS-1",
            )
        )
    Event.objects.bulk_create(rows, batch_size=2000)
    return sum(1 for r in rows if r.category == "radiology_report")


def _assert_notes_safe(folder) -> None:
    """No context line is or mentions a discharge summary; every report in a
    context was stored before the end of the stay's last window in the release
    (per window: _assert_no_leaks), and some reports are there at all."""
    summaries = set(
        Event.objects.filter(category="discharge_summary").values_list("id", flat=True)
    )
    assert summaries
    reports = 0
    for path in sorted((folder / "context").glob("*.jsonl")):
        for line in open(path, encoding="utf-8"):
            assert DISCHARGE_MARK not in line, path.name
            row = json.loads(line)
            assert row["event_id"] not in summaries
            reports += row["category"] == "radiology_report"
    assert reports > 0


def _assert_no_leaks(release, folder, reference: BedsideReference):
    """Every window of the release, read as a researcher reads it (the client's
    standalone cut over the downloaded files), against the independent
    reference: the same events, so none at or after the window's end, no row
    of the window's own decisions, no hindsight record; the listed own
    decisions are the reference's; no hindsight field outside ``hindsight``."""
    records = [json.loads(line) for line in open(folder / "windows.jsonl")]
    assert len(records) == release.window_count > 0
    windows = {
        w.pk: w
        for w in Window.objects.filter(
            pk__in=[r["window_id"] for r in records]
        ).select_related("stay")
    }
    events = {
        e.pk: e
        for e in Event.objects.filter(
            admission_id__in={w.stay.admission_id for w in windows.values()}
        ).only("time", "kind", "category")
    }
    checked = own_rows_seen = companions_listed = 0
    for window in iterate_windows(folder):
        record = window.record
        db_window = windows[record["window_id"]]
        admission_id = db_window.stay.admission_id
        seen = [row["event_id"] for row in window.context]
        expected = reference.expected(
            admission_id=admission_id, start=db_window.start, end=db_window.end
        )
        own = reference.own_decisions(
            admission_id=admission_id, start=db_window.start, end=db_window.end
        )
        own_rows_seen += len(own & set(seen))
        assert seen == expected, record["window_id"]
        assert all(events[i].time < db_window.end for i in seen)
        listed = set(record["window_action_event_ids"]) | set(
            record["window_companion_event_ids"]
        )
        assert listed == own, record["window_id"]
        companions_listed += len(record["window_companion_event_ids"])
        assert "disease_group" not in record
        assert set(record["hindsight"]) == {"disease_group"}
        assert "hindsight" not in window.model_input()
        assert "labels" not in window.model_input()
        checked += 1
    assert checked == len(records)
    assert own_rows_seen == 0
    # The stay files hold nothing past the stay's last window in the release,
    # and no hindsight record.
    for path in sorted((folder / "context").glob("*.jsonl")):
        stay_id = int(path.stem)
        last_end = max(w.end for w in windows.values() if w.stay_id == stay_id)
        for line in open(path, encoding="utf-8"):
            e = events[json.loads(line)["event_id"]]
            assert e.time < last_end
            assert e.kind not in (EventKind.OUTCOME, EventKind.CODED)
            assert e.category not in OUTCOME_REVEALING_CATEGORIES
    _assert_no_coded_record(folder, records)
    if Event.objects.filter(domain=Domain.NOTES).exists():
        _assert_notes_safe(folder)
    return companions_listed


def _assert_agent_contexts_clean(windows, reference: BedsideReference) -> int:
    """Every window's agent context and endpoint payload (agents.context, the
    runner's only source) against the reference; returns the windows checked."""
    by_stay = defaultdict(list)
    for w in windows:
        by_stay[w.stay].append(w)
    checked = 0
    for stay, stay_windows in by_stay.items():
        bounds = {w.pk: w for w in stay_windows}
        for ctx in stay_contexts(stay, bounds):
            window = bounds[ctx.window_id]
            expected = reference.expected(
                admission_id=stay.admission_id, start=window.start, end=window.end
            )
            assert [e["event_id"] for e in ctx.events] == expected, window.pk
            payload = ctx.payload()
            assert set(payload["static"]) <= BEDSIDE_STATIC_KEYS, payload["static"]
            assert [e["event_id"] for e in payload["events"]] == expected
            assert "disease_group" not in json.dumps(payload)
            checked += 1
    return checked


def _windows_reaching_coded_records(windows) -> int:
    """How many windows end after one of their admission's coded records: those
    whose bedside context held coded records while they were imported as
    actions."""
    first = {
        row["admission_id"]: row["first"]
        for row in Event.objects.filter(kind=EventKind.CODED)
        .values("admission_id")
        .annotate(first=Min("time"))
    }
    return sum(
        1
        for w in windows
        if w.stay.admission_id in first and first[w.stay.admission_id] < w.end
    )


def test_scale_release_of_the_whole_demo_leaks_nothing(
    clif_demo_dir, admin_user, release_dirs
):
    clif_import(directory=clif_demo_dir)
    assert _add_notes() > 100
    from windows.models import Stay

    windows_build_many(stays=Stay.objects.order_by("pk"), seed=0)
    windows = list(Window.objects.select_related("stay").order_by("start"))
    by_stay = defaultdict(list)
    for w in windows:
        by_stay[w.stay].append(w)
    assert add_events_at_window_ends(by_stay) > 100
    # As imported before coded records were marked, most windows' contexts
    # reached one (issue 11: 94 % of Scale windows).
    assert _windows_reaching_coded_records(windows) > 0.8 * len(windows)
    # Labels made then could cite a coded record and rate it as an action.
    coded_by_admission = {}
    for pk, admission_id in Event.objects.filter(kind=EventKind.CODED).values_list(
        "id", "admission_id"
    ):
        coded_by_admission.setdefault(admission_id, pk)
    labels = {}
    for w in windows:
        coded = coded_by_admission.get(w.stay.admission_id)
        cites = [coded] if coded else []
        labels[w] = (
            "stable",
            oracle_payload(
                problems=["Shock"],
                actions=["Fluids"],
                ratings=[(coded, "best_practice")] if coded else [],
                evidence=cites,
            ),
        )
    assert len(labels) > 1000
    run = make_oracle_run(admin=admin_user, labels=labels, name="demo")
    assert Event.objects.filter(category__in=OUTCOME_REVEALING_CATEGORIES).exists()
    release = release_build(
        release=release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    )
    reference = BedsideReference()
    # The demo's real carriers (issue 30: 172 Scale windows kept one) are
    # listed with their drug's start, and no context holds one.
    assert _assert_no_leaks(release, release_dirs / release.directory, reference) > 100
    # The same windows as agents and online endpoints get them.
    assert _assert_agent_contexts_clean(windows, reference) == len(windows)


def test_gold_release_with_real_consensus_leaks_nothing_and_hides_physicians(
    clif_demo_dir, admin_user, release_dirs
):
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from accounts.roles import Role
    from annotation.models import Assignment
    from annotation.selectors import recorded_critical_actions
    from annotation.services import (
        campaign_create,
        label_submit,
        window_consensus_refresh,
    )
    from evaluation.matcher import matcher_for_settings
    from tests.annotation.conftest import make_role_user
    from windows.models import Stay

    clif_import(directory=clif_demo_dir)
    assert _add_notes() > 100
    stays = list(Stay.objects.order_by("pk")[:3])
    windows_build_many(stays=Stay.objects.filter(pk__in=[s.pk for s in stays]), seed=0)
    gold = list(
        Window.objects.filter(sampled_gold=True).order_by("stay_id", "index")[:6]
    )
    by_stay = defaultdict(list)
    for w in Window.objects.select_related("stay").order_by("start"):
        by_stay[w.stay].append(w)
    assert add_events_at_window_ends(by_stay) > 0
    physicians = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    # The status cites evidence below; the problem's text is what is checked.
    campaign = campaign_create(
        admin=admin_user,
        name="demo gold",
        windows=gold,
        physicians=physicians,
        evidence_required=False,
    )
    # Each window's status cites its latest bedside event before the end.
    status_evidence = {
        window.pk: list(
            Event.objects.filter(
                admission_id=window.stay.admission_id, time__lt=window.end
            )
            .exclude(kind__in=(EventKind.OUTCOME, EventKind.CODED))
            .order_by("-time", "-pk")
            .values_list("pk", flat=True)[:1]
        )
        for window in gold
    }
    for window in gold:
        for n, physician in enumerate(physicians):
            assignment = Assignment.objects.get(
                campaign=campaign, window=window, annotator=physician, active=True
            )
            label_submit(
                annotator=physician,
                assignment_id=assignment.pk,
                payload={
                    "status": "stable",
                    # One physician cites it: the consensus takes the union.
                    "status_evidence": status_evidence[window.pk] if n else [],
                    "acute_problems": [{"text": "Septic shock", "evidence": []}],
                    "action_ratings": [
                        {"event_id": e.pk, "rating": "acceptable", "evidence": []}
                        for e in recorded_critical_actions(assignment=assignment)
                    ],
                    "added_actions": [],
                    "red_flags": [{"text": "Avoid fluid overload", "evidence": []}],
                },
                base_version=0,
            )
    matcher = matcher_for_settings(tau=0.5)
    for window in gold:
        window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    release = release_build(
        release=release_create(
            user=admin_user, kind=ReleaseKind.GOLD, campaign=campaign
        )
    )
    folder = release_dirs / release.directory
    _assert_no_leaks(release, folder, BedsideReference())
    record = json.loads(open(folder / "windows.jsonl").readline())
    assert (
        record["labels"]["status"]["evidence"] == status_evidence[record["window_id"]]
    )
    assert record["labels"]["status"]["evidence"]
    problem = record["labels"]["acute_problems"][0]
    assert problem["text"] == "Septic shock"
    assert problem["provenance"]["source"] == "consensus"
    assert all(r.startswith("rater-") for r in problem["provenance"]["raters"])
    everything = "".join(
        p.read_text(errors="ignore")
        for p in folder.rglob("*")
        if p.suffix in (".json", ".jsonl", ".md")
    )
    for physician in physicians:
        assert physician.username not in everything
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["agreement_report"]["windows"] == 6
    assert "label_ids" not in everything and "decision_id" not in everything
