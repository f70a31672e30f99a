"""The event tables' paginator (windows.selectors_pages.EndPaginator, issue
35): a page in the second half is read from the end (the reversed ordering,
a small OFFSET) and shows the very rows, in the very order, that the plain
Paginator shows, ties in time broken by id as before."""

from datetime import timedelta

import pytest
from django.core.paginator import Paginator
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.roles import Role
from tests.annotation.conftest import make_role_user
from tests.factories import make_admission, make_event, make_stay
from windows import presentation
from windows.models import Event
from windows.selectors import stay_events
from windows.selectors_pages import EndPaginator

pytestmark = pytest.mark.django_db


@pytest.fixture
def stay(db):
    admission = make_admission()
    stay = make_stay(admission=admission, hours=30)
    # 23 events, three at each of several hours (same time: id breaks ties).
    for n in range(23):
        make_event(
            admission=admission,
            time=stay.intime + timedelta(hours=n // 3),
            value_num=float(n),
        )
    return stay


def _ids(page) -> list[int]:
    return [event.pk for event in page.object_list]


@pytest.mark.parametrize("orphans", [0, 2])
def test_every_page_shows_what_the_plain_paginator_shows(stay, orphans):
    events = stay_events(stay=stay)
    plain = Paginator(events, 5, orphans=orphans)
    fast = EndPaginator(stay_events(stay=stay), 5, orphans=orphans)
    assert fast.num_pages == plain.num_pages
    for number in plain.page_range:
        assert _ids(fast.page(number)) == _ids(plain.page(number))
        assert fast.page(number).start_index() == plain.page(number).start_index()
    expected = list(
        Event.objects.filter(admission=stay.admission).order_by("time", "id")
    )
    assert _ids(fast.get_page(10**6)) == [e.pk for e in expected[20:]]


def test_a_late_page_is_read_backwards_from_the_end(stay):
    paginator = EndPaginator(stay_events(stay=stay), 5)
    assert paginator.count == 23  # counted first, as a page's template does
    with CaptureQueriesContext(connection) as ctx:
        list(paginator.page(paginator.num_pages).object_list)
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    assert "DESC" in sql and "OFFSET" not in sql  # the last rows: LIMIT alone
    with CaptureQueriesContext(connection) as ctx:
        list(paginator.page(1).object_list)
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    assert "DESC" not in sql


def test_the_stay_page_s_last_page_lists_the_last_events(stay, monkeypatch):
    monkeypatch.setattr(presentation, "STAY_EVENTS_PER_PAGE", 5)
    client = make_client()
    html = client.get(f"/stays/{stay.pk}/?page=5").content.decode()
    events = list(Event.objects.filter(admission=stay.admission).order_by("time", "id"))
    # The last page (21-23 of 23): the table's events, in time order.
    at = {e.pk: html.find(f"· {e.source_key}</td>") for e in events}
    shown = sorted((at[e.pk], e.pk) for e in events if at[e.pk] >= 0)
    assert [pk for _, pk in shown] == [e.pk for e in events[20:]]


def make_client():
    from django.test import Client

    client = Client()
    client.force_login(make_role_user(Role.ADMIN))
    return client
