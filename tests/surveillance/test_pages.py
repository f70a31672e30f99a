"""The admin page of a stay's checkpoints: the decision over the trajectory and
each finding with its evidence; admins only."""

from datetime import timedelta

import pytest
from django.test import Client

from accounts.roles import Role
from tests.annotation.conftest import make_role_user
from tests.factories import lab, make_admission, make_stay

pytestmark = pytest.mark.django_db


@pytest.fixture
def stay(db):
    admission = make_admission()
    stay = make_stay(admission=admission, hours=9)
    lab(stay, "inr", 2.5, 5.5, name="INR")
    return stay


def _client(role):
    client = Client()
    client.force_login(make_role_user(role))
    return client


def _computed_by_the_worker(client, url: str, stay) -> str:
    """The page once the worker it asked has computed the checkpoints."""
    from jobs.models import OutboxMessage
    from surveillance.services import CHECKPOINTS_TASK
    from surveillance.tasks import stay_checkpoints_task

    pending = client.get(url).content.decode()
    assert 'data-computed="no"' in pending
    assert "escalate" not in pending
    asked = OutboxMessage.objects.filter(task=CHECKPOINTS_TASK)
    assert [m.args for m in asked] == [[stay.pk]]
    stay_checkpoints_task(stay.pk)
    asked.delete()
    html = client.get(url).content.decode()
    assert 'data-computed="yes"' in html
    return html


def test_admin_sees_each_checkpoint_and_the_evidence(stay):
    from django.core.cache import cache

    cache.clear()
    url = f"/surveillance/stays/{stay.pk}/"
    html = _computed_by_the_worker(_client(Role.ADMIN), url, stay)
    # Checkpoints 0, 4, 8: the INR at 5.5 h is an alert at 8 h only.
    assert html.count("<strong>escalate</strong>") == 1
    assert 'data-finding="severe_coagulopathy"' in html
    assert "inr = 2.5 at 8.0 h" in html
    assert "INR &gt;= 2.0 within 24 h" in html


def test_the_page_is_for_admins_only(stay):
    assert (
        _client(Role.PHYSICIAN).get(f"/surveillance/stays/{stay.pk}/").status_code
        == 403
    )
    assert _client(Role.ADMIN).get("/surveillance/stays/999999/").status_code == 404


def test_a_waiting_page_asks_a_worker_once_and_polls_for_the_checkpoints(stay):
    """Issue 35: the first view no longer computes the checkpoints in the
    request (3 s and more on a loaded machine); it asks a worker, once however
    often the page is viewed meanwhile, and its htmx poll gets the checkpoints
    alone once they are there."""
    from django.core.cache import cache

    from jobs.models import OutboxMessage
    from surveillance.selectors import checkpoints_cache_key
    from surveillance.services import CHECKPOINTS_TASK
    from surveillance.tasks import stay_checkpoints_task

    cache.clear()
    client = _client(Role.ADMIN)
    url = f"/surveillance/stays/{stay.pk}/"
    first = client.get(url)
    assert first["Cache-Control"] == "no-store"
    html = first.content.decode()
    assert 'role="status"' in html and "Computing the checkpoints" in html
    assert f'hx-get="{url}"' in html
    poll = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert poll.lstrip().startswith('<div id="checkpoints" data-computed="no"')
    assert "<html" not in poll
    assert OutboxMessage.objects.filter(task=CHECKPOINTS_TASK).count() == 1
    assert "data-slow" not in poll

    # A minute later with no answer, the page says no worker has answered.
    marker = f"{checkpoints_cache_key(stay=stay)}:queued"
    cache.set(marker, cache.get(marker) - timedelta(seconds=60))
    assert "data-slow" in client.get(url).content.decode()

    stay_checkpoints_task(stay.pk)
    done = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert done.lstrip().startswith('<div id="checkpoints" data-computed="yes"')
    assert "hx-get" not in done
    assert done.count("<strong>escalate</strong>") == 1


def test_a_computed_page_reads_a_bounded_number_of_queries(
    stay, django_assert_max_num_queries
):
    from django.core.cache import cache

    from surveillance.tasks import stay_checkpoints_task

    cache.clear()
    stay_checkpoints_task(stay.pk)
    client = _client(Role.ADMIN)
    client.get(f"/surveillance/stays/{stay.pk}/")  # the session's first read
    # Session and user, the stay, its events signature (two reads).
    with django_assert_max_num_queries(6):
        html = client.get(f"/surveillance/stays/{stay.pk}/").content.decode()
    assert html.count("<strong>escalate</strong>") == 1


def test_checkpoints_are_read_back_until_the_trajectory_changes(stay, monkeypatch):
    """Issue 35: the page reads the stay's checkpoints from the cache (13
    replays of the tracks take seconds); an event written since (the
    admission's events version) has a worker compute them again, the page
    saying so meanwhile."""
    from django.core.cache import cache

    from surveillance import selectors
    from windows.services import admission_events_touch

    cache.clear()
    client = _client(Role.ADMIN)
    url = f"/surveillance/stays/{stay.pk}/"
    first = _computed_by_the_worker(client, url, stay)
    computed = selectors.stay_checkpoints

    def not_again(*args, **kwargs):
        raise AssertionError("computed again for an unchanged trajectory")

    monkeypatch.setattr(selectors, "stay_checkpoints", not_again)
    assert client.get(url).content.decode().count("<strong>escalate</strong>") == 1
    assert first.count("<strong>escalate</strong>") == 1

    # A second INR at 2.5 h: the alert now comes at checkpoint 4 too.
    lab(stay, "inr", 2.5, 2.5, name="INR")
    admission_events_touch(admission_ids=[stay.admission_id])
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return computed(*args, **kwargs)

    monkeypatch.setattr(selectors, "stay_checkpoints", counted)
    again = _computed_by_the_worker(client, url, stay)
    assert calls == [1]
    assert again.count("<strong>escalate</strong>") == 2
