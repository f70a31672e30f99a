"""The admin page of a stay's checkpoints: the decision over the trajectory and
each finding with its evidence; admins only."""

from datetime import timedelta

import pytest
from django.test import Client

from accounts.roles import Role
from tests.annotation.conftest import make_role_user
from tests.factories import make_admission, make_event, make_stay
from windows.models import Domain

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def stay(db):
    admission = make_admission()
    stay = make_stay(admission=admission, hours=9)
    make_event(
        admission=admission,
        time=stay.intime + timedelta(hours=5.5),
        domain=Domain.LABS,
        category="inr",
        name="INR",
        value_num=2.5,
        unit="",
        source_table="labs",
    )
    return stay


def _client(role):
    client = Client()
    client.force_login(make_role_user(role))
    return client


def test_admin_sees_each_checkpoint_and_the_evidence(stay):
    response = _client(Role.ADMIN).get(f"/surveillance/stays/{stay.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
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


def test_checkpoints_are_read_back_until_the_trajectory_changes(stay, monkeypatch):
    """Issue 35: the page reads the stay's checkpoints from the cache (13
    replays of the tracks take seconds); an event written since (the
    admission's events version) computes them again."""
    from django.core.cache import cache

    from surveillance import selectors
    from windows.services import admission_events_touch

    cache.clear()
    client = _client(Role.ADMIN)
    url = f"/surveillance/stays/{stay.pk}/"
    first = client.get(url).content.decode()
    computed = selectors.stay_checkpoints

    def not_again(*args, **kwargs):
        raise AssertionError("computed again for an unchanged trajectory")

    monkeypatch.setattr(selectors, "stay_checkpoints", not_again)
    assert client.get(url).content.decode().count("<strong>escalate</strong>") == 1
    assert first.count("<strong>escalate</strong>") == 1

    # A second INR at 2.5 h: the alert now comes at checkpoint 4 too.
    make_event(
        admission=stay.admission,
        time=stay.intime + timedelta(hours=2.5),
        domain=Domain.LABS,
        category="inr",
        name="INR",
        value_num=2.5,
        unit="",
        source_table="labs",
    )
    admission_events_touch(admission_ids=[stay.admission_id])
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return computed(*args, **kwargs)

    monkeypatch.setattr(selectors, "stay_checkpoints", counted)
    again = client.get(url).content.decode()
    assert calls == [1]
    assert again.count("<strong>escalate</strong>") == 2
