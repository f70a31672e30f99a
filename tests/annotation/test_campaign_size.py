"""Campaigns of any size (issue 13, point 5): the admin draws a number of windows
(and stays) with a seed, balanced over stays; impossible requests are refused
with a message and create nothing; the campaign list, the campaign page and the
physician's queue are paginated, count in the database, and their query counts do
not grow with the campaign."""

import re
from collections import Counter

import pytest
from django.urls import reverse

from accounts.roles import Role
from annotation.assigning import windows_draw, windows_per_stay_allocate
from annotation.models import Assignment, AssignmentState, Campaign, CampaignWindow
from annotation.services import campaign_create
from tests.annotation.conftest import make_gold_stays, make_role_user
from windows.models import Cohort, CohortStay, CohortStratum

pytestmark = pytest.mark.django_db

NEW = "annotation:campaign_new"


def windows_of(campaign) -> list[int]:
    return sorted(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    )


def per_stay(campaign) -> Counter:
    return Counter(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window__stay_id", flat=True
        )
    )


@pytest.fixture
def four_stays(db):
    """Four stays of 12 Gold windows each, and one of 2: 50 windows."""
    return [*make_gold_stays(stays=4), *make_gold_stays(stays=1, hours=1)]


# The draw ----------------------------------------------------------------------


def test_allocation_fills_from_stays_with_room():
    alloc = windows_per_stay_allocate(
        available={"a": 1, "b": 10, "c": 10}, order=["c", "a", "b"], total=12
    )
    # "a" has one window; the other two share the rest, "c" first in order.
    assert alloc == {"a": 1, "b": 5, "c": 6}


def test_draw_is_reproducible_balanced_and_seed_dependent():
    by_stay = {f"s{i:02}": [(i, j) for j in range(12)] for i in range(10)}
    first = windows_draw(windows_by_stay=by_stay, seed=7, window_count=25)
    again = windows_draw(
        windows_by_stay=dict(reversed(by_stay.items())), seed=7, window_count=25
    )
    other = windows_draw(windows_by_stay=by_stay, seed=8, window_count=25)
    assert first == again
    assert first != other
    assert len(first) == len(set(first)) == 25
    counts = Counter(stay for stay, _ in first)
    assert len(counts) == 10 and max(counts.values()) - min(counts.values()) <= 1


def test_draw_takes_stays_first():
    by_stay = {f"s{i:02}": [(i, j) for j in range(12)] for i in range(10)}
    drawn = windows_draw(windows_by_stay=by_stay, seed=3, window_count=9, stay_count=3)
    assert Counter(stay for stay, _ in drawn) == Counter(
        {stay: 3 for stay in {s for s, _ in drawn}}
    )
    assert len({s for s, _ in drawn}) == 3
    # Without a window count: every window of the drawn stays.
    whole = windows_draw(windows_by_stay=by_stay, seed=3, stay_count=3)
    assert len(whole) == 36
    assert {s for s, _ in whole} == {s for s, _ in drawn}


# Creating a campaign with counts ------------------------------------------------


def test_campaign_with_window_count_is_reproducible_and_balanced(
    admin_user, physicians, four_stays
):
    kwargs = {"physicians": physicians, "annotators_per_window": 2, "seed": 11}
    all_ids = [w.pk for stay in four_stays for w in stay]
    first = campaign_create(
        admin=admin_user, name="A", windows=all_ids, window_count=10, **kwargs
    )
    second = campaign_create(
        admin=admin_user, name="B", windows=all_ids, window_count=10, **kwargs
    )
    assert len(windows_of(first)) == 10
    assert windows_of(first) == windows_of(second)
    assert first.assignments.count() == 20
    # Five stays, two windows each.
    assert sorted(per_stay(first).values()) == [2, 2, 2, 2, 2]
    third = campaign_create(
        admin=admin_user,
        name="C",
        windows=all_ids,
        window_count=10,
        **{**kwargs, "seed": 12},
    )
    assert windows_of(third) != windows_of(first)


def test_campaign_with_stay_count(admin_user, physicians, four_stays):
    all_ids = [w.pk for stay in four_stays for w in stay]
    campaign = campaign_create(
        admin=admin_user,
        name="Two stays",
        windows=all_ids,
        physicians=physicians,
        annotators_per_window=1,
        window_count=9,
        stay_count=2,
        seed=5,
    )
    counts = per_stay(campaign)
    assert len(counts) == 2 and sum(counts.values()) == 9
    assert max(counts.values()) - min(counts.values()) <= 1
    # One rater per window, load balanced over the two physicians.
    loads = Counter(campaign.assignments.values_list("annotator_id", flat=True))
    assert sorted(loads.values()) == [4, 5]


def test_form_creates_drawn_campaign_with_evidence_setting(
    admin_client, physicians, four_stays
):
    data = {
        "name": "Drawn",
        "physicians": [p.pk for p in physicians],
        "annotators_per_window": 2,
        "window_count": 12,
        "stay_count": 3,
        "seed": 4,
    }
    response = admin_client.post(reverse(NEW), data)
    assert response.status_code == 302
    drawn = Campaign.objects.get(name="Drawn")
    assert drawn.evidence_required is False  # the box was not ticked
    assert sorted(per_stay(drawn).values()) == [4, 4, 4]
    assert drawn.assignments.count() == 24
    page = admin_client.get(response["Location"]).content.decode()
    assert "created: 12 windows, 24 assignments." in page
    assert "evidence optional" in page

    admin_client.post(
        reverse(NEW), {**data, "name": "Drawn again", "evidence_required": "on"}
    )
    again = Campaign.objects.get(name="Drawn again")
    assert again.evidence_required is True
    assert windows_of(again) == windows_of(drawn)


def test_form_shows_what_is_available_and_ticks_evidence(admin_client, four_stays):
    cohort = Cohort.objects.create(name="Two stays", seed=1, target_size=2)
    for windows in four_stays[3:]:
        CohortStay.objects.create(
            cohort=cohort, stay=windows[0].stay, stratum=CohortStratum.DIED_SHORT
        )
    html = admin_client.get(reverse(NEW)).content.decode()
    assert 'data-available-windows="50"' in html
    assert "50 windows in 5 stays" in html
    assert f'<option value="{cohort.pk}">Two stays: 14 Gold windows in 2 stays' in html
    assert re.search(r'name="evidence_required"[^>]*checked', html)


def _campaign_rows() -> tuple[int, int, int]:
    """How many campaigns, campaign windows and assignments there are."""
    return (
        Campaign.objects.count(),
        CampaignWindow.objects.count(),
        Assignment.objects.count(),
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            {"window_count": 51},
            "51 windows asked for, but only 50 sampled Gold windows are available "
            "(in 5 stays).",
        ),
        (
            {"stay_count": 6},
            "6 stays asked for, but the sampled Gold windows come from only 5 stays.",
        ),
        (
            {"stay_count": 4, "window_count": 3},
            "4 stays need at least 4 windows (one each); 3 asked for.",
        ),
        (
            {"stay_count": 1, "window_count": 13, "seed": 0},
            "hold only",
        ),
        (
            {"annotators_per_window": 3},
            "3 annotators per window need at least 3 physicians; 2 chosen.",
        ),
        ({"window_count": 0}, "greater than or equal to 1"),
        ({"window_count": "many"}, "Enter a whole number."),
    ],
)
def test_impossible_requests_are_refused_and_create_nothing(
    admin_client, physicians, four_stays, extra, message
):
    before = _campaign_rows()
    response = admin_client.post(
        reverse(NEW),
        {
            "name": "Impossible",
            "physicians": [p.pk for p in physicians],
            "annotators_per_window": 2,
            **extra,
        },
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert _campaign_rows() == before


def test_one_stay_too_small_for_the_count_names_the_draw(
    admin_user, physicians, four_stays
):
    """Stays of 12 and of 2 windows: one stay drawn cannot hold 13 windows, and
    the message says how many it holds."""
    all_ids = [w.pk for stay in four_stays for w in stay]
    with pytest.raises(Exception, match=r"The 1 stays drawn with seed 0 hold only"):
        campaign_create(
            admin=admin_user,
            name="Short",
            windows=all_ids,
            physicians=physicians,
            window_count=13,
            stay_count=1,
            seed=0,
        )
    assert not Campaign.objects.exists()


# Pages --------------------------------------------------------------------------


@pytest.fixture
def big_campaign(admin_user, four_stays):
    """50 windows, one rater each, all for one physician: 50 assignments, more
    than a page of the campaign page (50) once another window is added."""
    more = make_gold_stays(stays=1, hours=6)
    doctor = make_role_user(Role.PHYSICIAN, username="doc")
    campaign = campaign_create(
        admin=admin_user,
        name="Big",
        windows=[w.pk for stay in [*four_stays, *more] for w in stay],
        physicians=[doctor],
        annotators_per_window=1,
    )
    return campaign, doctor


def rows_of(html: str, attribute: str) -> list[str]:
    return re.findall(rf'{attribute}="(\d+)"', html)


def test_queue_is_paginated_with_the_next_window_first(client, big_campaign):
    campaign, doctor = big_campaign
    assignments = list(
        Assignment.objects.filter(campaign=campaign).order_by(
            "window__stay_id", "window__index"
        )
    )
    assert len(assignments) == 62
    # The first three are submitted: the next window to do is the fourth.
    Assignment.objects.filter(pk__in=[a.pk for a in assignments[:3]]).update(
        state=AssignmentState.SUBMITTED
    )
    Assignment.objects.filter(pk=assignments[5].pk).update(state=AssignmentState.DRAFT)
    client.force_login(doctor)
    url = reverse("annotation:queue")
    html = client.get(url).content.decode()
    shown = rows_of(html, "data-assignment-id")
    assert len(shown) == 50
    assert shown[0] == str(assignments[3].pk)
    assert (
        f'data-assignment-id="{assignments[3].pk}" data-state="todo" data-next-row'
        in (html)
    )
    assert str(assignments[0].pk) not in shown
    assert "3 of 62 submitted (5%)" in html
    assert "1 draft · 58 to do" in html
    assert "1–50 of 62 windows" in html
    assert re.search(r'href="\?page=2"[^>]*rel="next"', html)
    # The queue's n opens the next window, not the next page.
    assert "data-page-next" not in html

    second = client.get(url, {"page": 2}).content.decode()
    rest = rows_of(second, "data-assignment-id")
    assert len(rest) == 12
    # Submitted windows come last.
    assert rest[-3:] == [str(a.pk) for a in assignments[:3]]
    assert not set(rest) & set(shown)

    partial = client.get(url, {"page": 2}, headers={"HX-Request": "true"})
    assert b"<html" not in partial.content
    assert rows_of(partial.content.decode(), "data-assignment-id") == rest


def test_campaign_page_is_paginated_and_filtered(admin_client, big_campaign):
    campaign, doctor = big_campaign
    first_two = list(
        CampaignWindow.objects.filter(campaign=campaign)
        .order_by("window__stay_id", "window__index")
        .values_list("window_id", flat=True)[:2]
    )
    Assignment.objects.filter(campaign=campaign, window_id__in=first_two).update(
        state=AssignmentState.SUBMITTED
    )
    url = reverse("annotation:campaign_detail", args=[campaign.pk])
    html = admin_client.get(url).content.decode()
    shown = rows_of(html, "data-window-id")
    assert len(shown) == 50
    assert "1–50 of 62 windows" in html
    assert "2 of 62 labels submitted (3%)" in html
    assert re.search(r"data-windows-complete>\s*2 of 62\s*<", html)
    assert re.search(r'href="\?page=2"[^>]*data-page-next', html)

    second = admin_client.get(url, {"page": 2}).content.decode()
    assert len(rows_of(second, "data-window-id")) == 12
    assert not set(rows_of(second, "data-window-id")) & set(shown)

    complete = admin_client.get(url, {"show": "complete"}).content.decode()
    assert rows_of(complete, "data-window-id") == [str(pk) for pk in first_two]
    open_ = admin_client.get(url, {"show": "open"}).content.decode()
    assert "60 windows" in open_
    assert str(first_two[0]) not in rows_of(open_, "data-window-id")

    # Adding a rater to a window of page 2 comes back to page 2.
    last = rows_of(second, "data-window-id")[-1]
    other = make_role_user(Role.PHYSICIAN)
    response = admin_client.post(
        reverse("annotation:campaign_assignment_add", args=[campaign.pk]),
        {"window": last, "physician": other.pk},
    )
    assert response["Location"] == f"{url}?page=2#window-{last}"


def test_campaign_list_is_paginated_with_counts(admin_client, admin_user, physicians):
    windows = make_gold_stays(stays=1, hours=2)[0]
    for i in range(27):
        campaign_create(
            admin=admin_user,
            name=f"Campaign {i:02}",
            windows=[w.pk for w in windows],
            physicians=physicians,
            annotators_per_window=2,
            window_count=2 + i % 3,
        )
    url = reverse("annotation:campaign_list")
    html = admin_client.get(url).content.decode()
    assert len(rows_of(html, "data-campaign-id")) == 25
    assert "1–25 of 27 campaigns" in html
    newest = Campaign.objects.get(name="Campaign 26")
    row = re.search(
        rf'<tr data-campaign-id="{newest.pk}".*?</tr>', html, re.DOTALL
    ).group(0)
    # 4 windows, 2 physicians, 8 assignments.
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["4", "2", "2"]
    assert "0 of 8 (0%)" in row
    second = admin_client.get(url, {"page": 2}).content.decode()
    assert len(rows_of(second, "data-campaign-id")) == 2


# Query counts do not grow with the campaign ------------------------------------------
# Measured: 8, 14 and 6 for both sizes (session, user and roles included); one
# more is allowed for the site's navigation, far fewer than a query per row.

QUEUE_QUERIES = 9
DETAIL_QUERIES = 15
LIST_QUERIES = 7


@pytest.mark.parametrize("stays", [1, 5])
def test_page_query_counts_do_not_grow_with_the_campaign(
    client, admin_user, django_assert_max_num_queries, stays
):
    """One stay of 12 windows, or five (60 windows), three physicians, two
    raters a window, some work done: the same bound for each page."""
    doctors = [make_role_user(Role.PHYSICIAN) for _ in range(3)]
    windows = [w.pk for stay in make_gold_stays(stays=stays) for w in stay]
    campaign = campaign_create(
        admin=admin_user,
        name="Sized",
        windows=windows,
        physicians=doctors,
        annotators_per_window=2,
    )
    ids = list(campaign.assignments.values_list("pk", flat=True))
    Assignment.objects.filter(pk__in=ids[::3]).update(state=AssignmentState.SUBMITTED)
    Assignment.objects.filter(pk__in=ids[1::3]).update(state=AssignmentState.DRAFT)

    client.force_login(doctors[0])
    with django_assert_max_num_queries(QUEUE_QUERIES):
        assert client.get(reverse("annotation:queue")).status_code == 200
    client.force_login(admin_user)
    with django_assert_max_num_queries(DETAIL_QUERIES):
        response = client.get(reverse("annotation:campaign_detail", args=[campaign.pk]))
        assert response.status_code == 200
    with django_assert_max_num_queries(LIST_QUERIES):
        assert client.get(reverse("annotation:campaign_list")).status_code == 200
