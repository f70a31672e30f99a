"""The tests' worker (tests/conftest.py ``celery_worker_process``) takes only
the messages sent from its test's start: a message an earlier test left on the
shared broker, sent while no worker ran, is purged before the worker starts,
so a test that counts what its worker received counts its own."""

import pytest

from realicu_web.celery import app
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# Any registered task that does nothing for an absent row will do.
TASK = "surveillance.tasks.stay_checkpoints_task"


def test_a_message_left_from_before_the_test_never_reaches_its_worker(
    request, tmp_path
):
    left = app.send_task(TASK, args=[-1])
    request.getfixturevalue("celery_worker_process")
    own = app.send_task(TASK, args=[-2])
    log = tmp_path / "worker.log"
    wait_for(lambda: f"[{own.id}] succeeded" in log.read_text(), "the test's task")
    assert left.id not in log.read_text()
