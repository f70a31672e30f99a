"""Fixtures of the client tests: the client package on the path (it lives in
``client/``, installed by researchers with pip), the exports tests' tiny
release, a researcher's token, and a scorer thread standing in for the worker
(the live server runs in this process)."""

import sys
import threading
from pathlib import Path

import pytest

CLIENT_DIR = Path(__file__).resolve().parents[2] / "client"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))

from tests.exports.conftest import (  # noqa: E402, F401
    physician,
    release_dirs,
    tiny_labels,
    tiny_release,
    tiny_run,
    tiny_stays,
)


@pytest.fixture
def token(researcher):
    from exports.services import token_create

    return token_create(user=researcher).key


@pytest.fixture
def api(live_server, token):
    from realicu_client import Client

    return Client(live_server.url, token, timeout=30)


@pytest.fixture
def scorer(transactional_db):
    """Scores queued submissions with the exports tests' exact-text matcher,
    in a thread, as a worker would after the outbox sends the job."""
    from django.db import connection

    from exports.models import Submission, SubmissionState
    from exports.services import submission_score
    from tests.exports.helpers import ExactMatcher

    stop = threading.Event()
    scored = []

    def run():
        try:
            while not stop.is_set():
                for submission in Submission.objects.filter(
                    state=SubmissionState.QUEUED
                ):
                    submission_score(submission=submission, matcher=ExactMatcher())
                    scored.append(submission.pk)
                stop.wait(0.2)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield scored
    stop.set()
    thread.join(timeout=30)


@pytest.fixture
def edge_events(tiny_stays):
    """Events of stay A around its first window's end: a microsecond before
    (in that window's context), exactly at the end and half a second after
    (both after it, in the next window's)."""
    from datetime import timedelta

    from tests.factories import make_event

    stay = tiny_stays["stays"][0]
    end = tiny_stays["windows"]["A"][0].end
    return {
        name: make_event(admission=stay.admission, time=end + delta)
        for name, delta in (
            ("just_before", -timedelta(microseconds=1)),
            ("at_end", timedelta(0)),
            ("half_second_after", timedelta(milliseconds=500)),
        )
    }


@pytest.fixture
def release(edge_events, tiny_run, admin_user):
    """The exports tests' tiny Scale release (4 windows, 3 stays), built with
    the edge events in stay A's context file."""
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.services import release_create

    return release_build(
        release=release_create(
            user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
        )
    )
