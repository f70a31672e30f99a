"""A fanned-out build whose workers were killed (issue 29): the import page says
it is stalled, not "Running · 2 workers busy", and an admin resumes it (its
unfinished batches queued again and finished) or cancels it (the batches'
leases dropped, so a late worker stops)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.leases import JobLeaseLost, job_claim, job_heartbeat
from jobs.models import OutboxMessage
from tests.factories import make_event, make_stay, make_user
from windows.builds import (
    BUILD_TASK,
    build_batch_execute,
    build_run_create,
    build_run_progress,
)
from windows.models import BuildBatch, BuildKind, BuildRun, BuildState, StayTracks

pytestmark = pytest.mark.django_db

LONG_AGO = timedelta(minutes=10)


def _run(stays: int = 3) -> BuildRun:
    made = []
    for _ in range(stays):
        stay = make_stay(hours=6)
        make_event(admission=stay.admission, time=stay.intime + timedelta(hours=1))
        made.append(stay)
    return build_run_create(kind=BuildKind.TRACKS, stays=made, batch_stays=1)


def _taken(batch: BuildBatch, *, worker: str, ago: timedelta) -> str:
    """A worker took the batch; its last heartbeat was ``ago``."""
    lease = job_claim(model=BuildBatch, pk=batch.pk)
    BuildBatch.objects.filter(pk=batch.pk).update(
        worker=worker, heartbeat_at=timezone.now() - ago, progress_done=0
    )
    BuildRun.objects.filter(pk=batch.run_id).update(state=BuildState.RUNNING)
    return lease


def _killed(run: BuildRun) -> tuple[list[str], BuildBatch]:
    """Two workers took a batch each and were killed ten minutes ago; the
    third batch is still queued. Returns their leases and the queued batch."""
    first, second, third = run.batches.order_by("index")
    leases = [
        _taken(first, worker="node-a:11", ago=LONG_AGO),
        _taken(second, worker="node-b:12", ago=LONG_AGO),
    ]
    BuildRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - LONG_AGO)
    BuildBatch.objects.filter(pk=third.pk).update(created_at=timezone.now() - LONG_AGO)
    run.refresh_from_db()
    return leases, third


def _admin_client() -> Client:
    client = Client()
    client.force_login(make_user(staff=True, role="admin"))
    return client


def _build_row(client) -> str:
    html = client.get(reverse("windows:import_list")).content.decode()
    start = html.index('id="build-runs"')
    return html[start : html.index("</table>", start)]


def test_a_build_whose_workers_were_killed_shows_stalled_with_resume_and_cancel():
    run = _run()
    _killed(run)
    progress = build_run_progress(run=run)
    assert progress["stalled"] and progress["label"] == "Stalled"
    assert progress["workers"] == 0
    assert progress["lost_workers"] == ["node-a:11", "node-b:12"]
    assert progress["silent_seconds"] >= 599

    row = _build_row(_admin_client())
    assert ">Stalled<" in row and "Running" not in row
    assert "workers busy" not in row
    assert "no heartbeat for 6" in row  # 600 s, give or take the test's own time
    assert "node-a:11, node-b:12: its workers stopped" in row
    assert reverse("windows:build_resume", args=[run.pk]) in row
    assert reverse("windows:build_cancel", args=[run.pk]) in row
    assert "csrfmiddlewaretoken" in row and 'method="post"' in row


def test_a_build_no_worker_ever_took_says_so_once_it_has_waited():
    run = _run(stays=1)
    BuildRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - LONG_AGO)
    row = _build_row(_admin_client())
    assert ">Stalled<" in row
    assert "no worker has taken its batches in 6" in row
    assert "is a worker running?" in row


def test_a_build_with_a_live_worker_is_running_and_offers_no_resume():
    run = _run()
    first = run.batches.order_by("index").first()
    _taken(first, worker="node-a:11", ago=timedelta(seconds=2))
    run.refresh_from_db()
    progress = build_run_progress(run=run)
    assert not progress["stalled"] and progress["label"] == "Running"
    assert progress["workers"] == 1

    row = _build_row(_admin_client())
    assert ">Running<" in row and "1 worker busy" in row
    assert reverse("windows:build_resume", args=[run.pk]) not in row
    assert reverse("windows:build_cancel", args=[run.pk]) in row


def test_resume_queues_the_unfinished_batches_which_then_finish_the_build():
    run = _run()
    _killed(run)
    done_before = run.batches.order_by("index").last()
    build_batch_execute(batch_id=done_before.pk)  # the queued one, finished
    BuildBatch.objects.filter(pk=done_before.pk).update(
        finished_at=timezone.now() - LONG_AGO, heartbeat_at=timezone.now() - LONG_AGO
    )
    OutboxMessage.objects.all().delete()
    client = _admin_client()

    response = client.post(reverse("windows:build_resume", args=[run.pk]))

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.state == BuildState.RUNNING and run.error == ""
    open_batches = list(run.batches.exclude(pk=done_before.pk))
    for batch in open_batches:
        assert (batch.state, batch.lease, batch.attempts) == (BuildState.QUEUED, "", 0)
        assert "resumed by" in batch.progress_label
    sent = sorted(m.args[0] for m in OutboxMessage.objects.filter(task=BUILD_TASK))
    assert sent == sorted(b.pk for b in open_batches)
    row = _build_row(client)
    assert ">Stalled<" not in row and ">Running<" in row

    for batch in open_batches:  # the workers take the re-sent messages
        build_batch_execute(batch_id=batch.pk)
    run.refresh_from_db()
    assert run.state == BuildState.DONE and run.summary["stays"] == 3
    assert StayTracks.objects.count() == 3
    done_before.refresh_from_db()
    assert done_before.attempts == 1  # the finished batch was not run again


def test_cancel_drops_the_leases_so_a_late_worker_stops_and_a_late_message_does_nothing():
    run = _run()
    leases, queued = _killed(run)
    first = run.batches.order_by("index").first()
    client = _admin_client()

    response = client.post(reverse("windows:build_cancel", args=[run.pk]))

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.state == BuildState.FAILED and run.error.startswith("Cancelled by ")
    assert run.finished_at is not None
    for batch in run.batches.all():
        assert (batch.state, batch.lease) == (BuildState.FAILED, "")
        assert batch.error == run.error
    # The worker of the first batch wakes up: its next step stops it.
    with job_heartbeat(
        model=BuildBatch, pk=first.pk, lease=leases[0], interval=3600
    ) as beat:
        beat.beat()
        with pytest.raises(JobLeaseLost):
            beat(1, 1, "stay 1")
    # The queued batch's message arrives after the cancel: nothing is built.
    build_batch_execute(batch_id=queued.pk)
    queued.refresh_from_db()
    assert queued.state == BuildState.FAILED and queued.attempts == 0
    assert not StayTracks.objects.exists()

    row = _build_row(client)
    assert ">Cancelled<" in row and "Cancelled by " in row
    assert reverse("windows:build_resume", args=[run.pk]) in row
    assert reverse("windows:build_cancel", args=[run.pk]) not in row

    # Resume completes a cancelled build.
    client.post(reverse("windows:build_resume", args=[run.pk]))
    for batch in run.batches.all():
        build_batch_execute(batch_id=batch.pk)
    run.refresh_from_db()
    assert run.state == BuildState.DONE and StayTracks.objects.count() == 3


def test_resume_of_a_build_a_live_worker_holds_is_refused_and_changes_nothing():
    run = _run()
    first = run.batches.order_by("index").first()
    _taken(first, worker="node-a:11", ago=timedelta(seconds=2))
    OutboxMessage.objects.all().delete()
    client = _admin_client()

    response = client.post(reverse("windows:build_resume", args=[run.pk]), follow=True)

    assert "is running on node-a:11: it needs no resume" in response.content.decode()
    first.refresh_from_db()
    assert first.state == BuildState.RUNNING and first.lease
    assert not OutboxMessage.objects.exists()
    # Cancel stops it at once; a second cancel is refused with the reason.
    client.post(reverse("windows:build_cancel", args=[run.pk]))
    response = client.post(reverse("windows:build_cancel", args=[run.pk]), follow=True)
    assert "only a queued or running build can be cancelled" in (
        response.content.decode()
    )


def test_resume_and_cancel_are_for_admins_by_post_with_a_csrf_token():
    run = _run(stays=1)
    BuildRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - LONG_AGO)
    resume = reverse("windows:build_resume", args=[run.pk])
    cancel = reverse("windows:build_cancel", args=[run.pk])

    physician = Client()
    physician.force_login(make_user(role="physician"))
    assert physician.post(resume).status_code == 403
    assert physician.post(cancel).status_code == 403

    admin = make_user(staff=True, role="admin")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin)
    assert strict.post(resume).status_code == 403
    assert strict.post(cancel).status_code == 403

    client = Client()
    client.force_login(admin)
    assert client.get(resume).status_code == 405
    assert client.get(cancel).status_code == 405
    assert client.post(reverse("windows:build_cancel", args=[9999])).status_code == 404
    run.refresh_from_db()
    assert run.state == BuildState.QUEUED  # nothing changed
