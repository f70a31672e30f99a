"""Concept tracks, windows and the Gold draw fanned out on workers (windows.builds):
the same result as --inline, a batch delivered twice written once, a dead
worker's batch picked up by the reaper; and the admission's events version that
the stored tracks' freshness is read from (no request counts events)."""

import os
import random
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import OutboxMessage
from jobs.reaper import jobs_reap
from tests.factories import make_event, make_events, make_stay
from windows.builds import BUILD_TASK, build_batch_execute, build_run_create
from windows.models import (
    Admission,
    BuildBatch,
    BuildKind,
    BuildRun,
    BuildState,
    Domain,
    EventKind,
    Stay,
    StayTracks,
    Window,
)
from windows.services import admission_events_touch, events_high_water
from windows.tracks import stay_tracks_get


def _stays(n: int = 5, seed: int = 1) -> list[Stay]:
    """Stays of different lengths with heart rates, MAPs and norepinephrine
    actions at irregular times, so windows differ in density and Gold draws
    differ between stays."""
    rng = random.Random(seed)
    stays = []
    for i in range(n):
        stay = make_stay(hours=20 + 6 * i)
        t0 = stay.intime
        for h in range(0, 20 + 6 * i, 2):
            make_events(
                admission=stay.admission,
                count=rng.randint(1, 4),
                start=t0 + timedelta(hours=h, minutes=rng.randint(0, 20)),
                every=timedelta(minutes=3),
                domain=Domain.VITALS,
                category="map",
                value_num=float(rng.randint(55, 90)),
            )
            if rng.random() < 0.5:
                make_events(
                    admission=stay.admission,
                    count=rng.randint(1, 3),
                    start=t0 + timedelta(hours=h, minutes=rng.randint(0, 25)),
                    every=timedelta(minutes=1),
                    kind=EventKind.ACTION,
                    domain=Domain.MED_CONTINUOUS,
                    category="norepinephrine",
                    value_num=round(rng.uniform(0.05, 0.4), 2),
                    unit="mcg/kg/min",
                    value_text="dose_change",
                )
        stays.append(stay)
    # make_events writes in bulk: bump the versions as an importer's end does.
    admission_events_touch(admission_ids=[s.admission_id for s in stays])
    return stays


def _windows_snapshot() -> list[tuple]:
    return list(
        Window.objects.order_by("stay_id", "index").values_list(
            "stay_id",
            "index",
            "start",
            "end",
            "event_count",
            "action_count",
            "action_density",
            "sample_regime",
            "sampled_gold",
        )
    )


def _tracks_snapshot() -> list[tuple]:
    return [
        (t.stay_id, t.events_signature, t.hours, t.columns, t.meta)
        for t in StayTracks.objects.order_by("stay_id")
    ]


def _quiet():
    return {"stdout": StringIO(), "stderr": StringIO()}


@pytest.mark.django_db(transaction=True)
def test_fanned_out_on_a_worker_gives_what_inline_gives(celery_worker_process):
    _stays()
    call_command("build_windows", "--all", "--seed", "3", "--inline", **_quiet())
    call_command("build_concepts", "--inline", **_quiet())
    windows, tracks = _windows_snapshot(), _tracks_snapshot()
    assert sum(row[-1] for row in windows) == 50  # 10 Gold windows per stay
    Window.objects.all().delete()
    StayTracks.objects.all().delete()

    out = StringIO()
    call_command(
        "build_windows",
        "--all",
        "--seed",
        "3",
        "--batch-stays",
        "2",
        stdout=out,
        stderr=StringIO(),
    )
    assert "5 stays in 3 batches" in out.getvalue()
    assert "gold windows" in out.getvalue() and "50" in out.getvalue()
    out = StringIO()
    call_command("build_concepts", "--batch-stays", "2", stdout=out, stderr=StringIO())
    assert "5 stays computed" in out.getvalue()

    assert _windows_snapshot() == windows
    assert _tracks_snapshot() == tracks
    runs = BuildRun.objects.order_by("pk")
    assert [r.state for r in runs] == [BuildState.DONE, BuildState.DONE]
    assert runs[0].summary["gold"] == 50 and runs[1].summary["computed"] == 5
    # Every batch ran once, on the worker (not in this process).
    batches = BuildBatch.objects.all()
    assert {b.attempts for b in batches} == {1}
    assert all(b.worker and not b.worker.endswith(f":{os.getpid()}") for b in batches)


@pytest.mark.django_db
def test_a_batch_delivered_twice_is_written_once():
    stays = _stays(n=2)
    run = build_run_create(
        kind=BuildKind.TRACKS, stays=stays, params={"force": True}, batch_stays=5
    )
    batch = run.batches.get()
    assert OutboxMessage.objects.filter(task=BUILD_TASK, args=[batch.pk]).exists()
    build_batch_execute(batch_id=batch.pk)
    first = dict(StayTracks.objects.values_list("stay_id", "computed_at"))
    assert len(first) == 2
    build_batch_execute(batch_id=batch.pk)  # the broker delivers it again
    assert dict(StayTracks.objects.values_list("stay_id", "computed_at")) == first
    batch.refresh_from_db()
    assert (batch.state, batch.attempts) == (BuildState.DONE, 1)
    run.refresh_from_db()
    assert run.state == BuildState.DONE and run.summary == {"stays": 2, "computed": 2}


@pytest.mark.django_db
def test_a_dead_workers_batch_is_requeued_by_the_reaper_and_finished():
    stays = _stays(n=3)
    run = build_run_create(
        kind=BuildKind.WINDOWS, stays=stays, params={"seed": 0}, batch_stays=2
    )
    dead, alive = run.batches.order_by("index")
    # A worker took the first batch and died: its heartbeat stopped long ago.
    BuildBatch.objects.filter(pk=dead.pk).update(
        state=BuildState.RUNNING,
        lease="gone",
        worker="elsewhere:1",
        attempts=1,
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )
    OutboxMessage.objects.all().delete()
    counts = jobs_reap()
    assert counts.get("requeued") == 1
    dead.refresh_from_db()
    assert dead.state == BuildState.QUEUED and dead.lease == ""
    assert OutboxMessage.objects.filter(task=BUILD_TASK, args=[dead.pk]).exists()
    build_batch_execute(batch_id=alive.pk)
    run.refresh_from_db()
    assert run.state == BuildState.RUNNING  # one batch still open
    build_batch_execute(batch_id=dead.pk)  # the re-sent task, on another worker
    dead.refresh_from_db()
    run.refresh_from_db()
    assert (dead.state, dead.attempts) == (BuildState.DONE, 2)
    assert run.state == BuildState.DONE and run.summary["stays"] == 3
    assert set(Window.objects.values_list("stay_id", flat=True)) == {
        s.pk for s in stays
    }


@pytest.mark.django_db
def test_bad_settings_are_refused_before_anything_is_queued():
    stays = _stays(n=1)
    with pytest.raises(ValidationError, match="within 0..1"):
        build_run_create(kind=BuildKind.WINDOWS, stays=stays, params={"high_share": 2})
    with pytest.raises(ValidationError, match="Unknown build"):
        build_run_create(kind="cohort", stays=stays)
    assert not BuildRun.objects.exists() and not OutboxMessage.objects.exists()


@pytest.mark.django_db
def test_a_failing_batch_fails_its_run_with_the_reason(monkeypatch):
    stays = _stays(n=2)
    run = build_run_create(kind=BuildKind.TRACKS, stays=stays, batch_stays=1)
    first, second = run.batches.order_by("index")

    def broken(**kwargs):
        raise RuntimeError("disk full")

    build_batch_execute(batch_id=first.pk)
    monkeypatch.setattr("windows.tracks.tracks_build_all", broken)
    build_batch_execute(batch_id=second.pk)
    run.refresh_from_db()
    assert run.state == BuildState.FAILED
    assert "1 of 2 batches failed; batch 1: RuntimeError: disk full" in run.error


# --- the admission's events version ---------------------------------------------------


@pytest.mark.django_db
def test_new_events_bump_the_version_and_stale_tracks_are_recomputed():
    stay, other = make_stay(hours=6), make_stay(hours=6)
    make_event(
        admission=stay.admission,
        time=stay.intime + timedelta(minutes=30),
        domain=Domain.VITALS,
        category="map",
        value_num=70.0,
    )
    version = Admission.objects.get(pk=stay.admission_id).events_version
    assert version == 1  # one event saved on its own
    first = stay_tracks_get(stay=stay)
    assert first.events_signature.endswith(":e1")

    # A bulk write (an importer's) and its end hook: only that admission bumps.
    high_water = events_high_water()
    make_events(
        admission=stay.admission,
        count=3,
        start=stay.intime + timedelta(hours=2, minutes=10),
        domain=Domain.VITALS,
        category="map",
        value_num=50.0,
    )
    assert admission_events_touch(since_event_id=high_water) == 1
    assert Admission.objects.get(pk=stay.admission_id).events_version == 2
    assert Admission.objects.get(pk=other.admission_id).events_version == 0
    again = stay_tracks_get(stay=stay)
    assert again.events_signature != first.events_signature
    assert dict(zip(again.hours, again.columns["map"]))[3.0] == pytest.approx(50.0)


@pytest.mark.django_db
def test_reading_current_tracks_counts_no_events():
    stay = make_stay(hours=6)
    make_event(admission=stay.admission, time=stay.intime + timedelta(minutes=5))
    stay_tracks_get(stay=stay)
    with CaptureQueriesContext(connection) as queries:
        tracks = stay_tracks_get(stay=stay)
    assert tracks.events_signature.endswith(":e1")
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert "windows_event" not in sql
    assert len(queries.captured_queries) == 2  # the version, the stored row


# --- the progress bar on the import page ---------------------------------------------


@pytest.mark.django_db
def test_the_import_page_shows_a_builds_progress_and_polls_while_open(client):
    from django.urls import reverse

    from tests.factories import make_user

    stays = _stays(n=3)
    run = build_run_create(kind=BuildKind.TRACKS, stays=stays, batch_stays=2)
    first = run.batches.order_by("index").first()
    build_batch_execute(batch_id=first.pk)
    client.force_login(make_user(staff=True, role="admin"))
    html = client.get(reverse("windows:import_list")).content.decode()
    assert f'aria-label="Build {run.pk} progress"' in html
    assert "2/3 stays" in html and "batches 1/2" in html
    assert 'hx-select="#build-runs"' in html  # still open: the section polls

    build_batch_execute(batch_id=run.batches.order_by("index").last().pk)
    html = client.get(reverse("windows:import_list"), HTTP_HX_REQUEST="true")
    html = html.content.decode()
    assert "3/3 stays" in html and 'hx-select="#build-runs"' not in html

    client.force_login(make_user(role="physician"))
    assert client.get(reverse("windows:import_list")).status_code == 403
