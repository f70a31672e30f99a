"""The admin's campaign pages: the list with progress, the creation form, the
progress page with its add and reassign forms; 404 for everyone else."""

import re

import pytest
from django.urls import reverse

from accounts.roles import Role
from annotation.models import Assignment, AssignmentState, Campaign, CampaignWindow
from annotation.services import campaign_create, label_submit
from tests.annotation.conftest import make_gold_windows, make_role_user
from tests.factories import make_admission, make_stay
from windows.models import Cohort, CohortStay, CohortStratum

pytestmark = pytest.mark.django_db


@pytest.fixture
def cohort_windows(gold_windows):
    """A cohort holding the fixture stay, and Gold windows of another stay outside
    it."""
    cohort = Cohort.objects.create(name="Demo cohort", seed=1, target_size=1)
    CohortStay.objects.create(
        cohort=cohort, stay=gold_windows[0].stay, stratum=CohortStratum.DIED_SHORT
    )
    outside = make_gold_windows(
        stay=make_stay(admission=make_admission(), hours=12), count=2
    )
    return cohort, gold_windows, outside


def detail_url(campaign) -> str:
    return reverse("annotation:campaign_detail", args=[campaign.pk])


def test_admin_creates_campaign_through_form(admin_client, physicians, cohort_windows):
    cohort, inside, _outside = cohort_windows
    response = admin_client.post(
        reverse("annotation:campaign_new"),
        {
            "name": "Gold pilot",
            "cohort": cohort.pk,
            "physicians": [p.pk for p in physicians],
            "annotators_per_window": 2,
        },
    )
    campaign = Campaign.objects.get(name="Gold pilot")
    assert response.status_code == 302
    assert response["Location"] == detail_url(campaign)
    windows = set(
        CampaignWindow.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    )
    assert windows == {w.pk for w in inside}
    assert campaign.assignments.count() == len(inside) * 2
    for physician in physicians:
        assert campaign.assignments.filter(annotator=physician).count() == len(inside)
    page = admin_client.get(response["Location"])
    assert "Campaign &quot;Gold pilot&quot; created: 3 windows, 6 assignments." in (
        page.content.decode()
    )


def test_form_without_cohort_takes_every_gold_window(
    admin_client, physicians, cohort_windows
):
    _cohort, inside, outside = cohort_windows
    admin_client.post(
        reverse("annotation:campaign_new"),
        {
            "name": "All Gold",
            "physicians": [p.pk for p in physicians],
            "annotators_per_window": 1,
        },
    )
    campaign = Campaign.objects.get(name="All Gold")
    assert campaign.campaign_windows.count() == len(inside) + len(outside)
    assert campaign.assignments.count() == len(inside) + len(outside)


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"name": "Too few", "annotators_per_window": 3},
            "3 annotators per window need at least 3 physicians; 2 chosen.",
        ),
        ({"name": "  ", "annotators_per_window": 2}, "Give the campaign a name."),
        ({"name": "Gold 1", "annotators_per_window": 2}, "already exists"),
    ],
)
def test_bad_input_shows_error_and_creates_nothing(
    admin_client, physicians, campaign, data, message
):
    before = (Campaign.objects.count(), Assignment.objects.count())
    response = admin_client.post(
        reverse("annotation:campaign_new"),
        {**data, "physicians": [p.pk for p in physicians]},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="form-errors"' in html
    assert message.replace('"', "&quot;") in html
    assert (Campaign.objects.count(), Assignment.objects.count()) == before


def test_no_gold_windows_shows_error(admin_client, physicians, stay):
    response = admin_client.post(
        reverse("annotation:campaign_new"),
        {
            "name": "Empty",
            "physicians": [p.pk for p in physicians],
            "annotators_per_window": 2,
        },
    )
    assert "Choose at least one window for the campaign." in response.content.decode()
    assert not Campaign.objects.exists()


def test_list_shows_progress(admin_client, campaign, assignment, complete_payload):
    label_submit(
        annotator=assignment.annotator,
        assignment_id=assignment.pk,
        payload=complete_payload,
        base_version=0,
        submission_id="s1",
    )
    response = admin_client.get(reverse("annotation:campaign_list"))
    html = response.content.decode()
    assert response.status_code == 200
    assert f'data-campaign-id="{campaign.pk}"' in html
    assert 'max="6" value="1"' in html
    assert "1 of 6 (17%)" in html


def test_progress_page_numbers_match(
    admin_client, campaign, physicians, gold_windows, complete_payload
):
    first = campaign.assignments.get(annotator=physicians[0], window=gold_windows[0])
    second = campaign.assignments.get(annotator=physicians[1], window=gold_windows[0])
    for a in (first, second):
        label_submit(
            annotator=a.annotator,
            assignment_id=a.pk,
            payload=complete_payload,
            base_version=0,
            submission_id=f"s{a.pk}",
        )
    Assignment.objects.filter(annotator=physicians[0], window=gold_windows[1]).update(
        state=AssignmentState.DRAFT
    )

    response = admin_client.get(detail_url(campaign))
    assert response.status_code == 200
    html = response.content.decode()

    def counts(user):
        row = re.search(
            rf'<tr data-physician="{user.username}">(.*?)</tr>', html, re.DOTALL
        ).group(1)
        return {
            key: int(value)
            for key, value in re.findall(r'data-count="(\w+)">(\d+)<', row)
        }

    assert counts(physicians[0]) == {"todo": 1, "draft": 1, "submitted": 1, "total": 3}
    assert counts(physicians[1]) == {"todo": 2, "draft": 0, "submitted": 1, "total": 3}
    assert "2 of 6 labels submitted (33%)" in html
    assert re.search(r"data-windows-complete>\s*1 of 3\s*<", html)
    assert 'data-unshared-pairs="0"' in html
    window_row = re.search(
        rf'<tr id="window-{gold_windows[0].pk}".*?</tr>', html, re.DOTALL
    ).group(0)
    assert window_row.count('data-state="submitted"') == 2


def test_progress_page_lists_pairs_without_shared_window(
    admin_user, admin_client, physicians, gold_windows
):
    third = make_role_user(Role.PHYSICIAN, username="zed")
    campaign = campaign_create(
        admin=admin_user,
        name="Solo",
        windows=gold_windows[:1],
        physicians=[*physicians, third],
        annotators_per_window=1,
    )
    html = admin_client.get(detail_url(campaign)).content.decode()
    assert 'data-unshared-pairs="3"' in html


def test_add_third_rater_via_post(admin_client, campaign, gold_windows):
    third = make_role_user(Role.PHYSICIAN)
    window = gold_windows[0]
    url = reverse("annotation:campaign_assignment_add", args=[campaign.pk])
    response = admin_client.post(url, {"window": window.pk, "physician": third.pk})
    assert response.status_code == 302
    assert response["Location"] == f"{detail_url(campaign)}#window-{window.pk}"
    added = Assignment.objects.get(campaign=campaign, window=window, annotator=third)
    assert added.active and added.state == AssignmentState.TODO
    page = admin_client.get(detail_url(campaign)).content.decode()
    assert f"{third.username} added to" in page

    # Twice: refused with a message, nothing more written.
    admin_client.post(url, {"window": window.pk, "physician": third.pk})
    assert (
        Assignment.objects.filter(
            campaign=campaign, window=window, annotator=third
        ).count()
        == 1
    )
    page = admin_client.get(detail_url(campaign)).content.decode()
    assert "is already assigned" in page


def test_add_refuses_non_physician_and_foreign_window(
    admin_client, campaign, gold_windows, researcher
):
    url = reverse("annotation:campaign_assignment_add", args=[campaign.pk])
    before = Assignment.objects.count()
    admin_client.post(url, {"window": gold_windows[0].pk, "physician": researcher.pk})
    page = admin_client.get(detail_url(campaign)).content.decode()
    assert "Choose a physician to add to the window." in page
    other = make_gold_windows(
        stay=make_stay(admission=make_admission(), hours=12), count=1
    )[0]
    response = admin_client.post(
        url, {"window": other.pk, "physician": campaign.physicians.first().pk}
    )
    assert response.status_code == 404
    assert Assignment.objects.count() == before


def test_reassign_via_post(admin_client, campaign, assignment):
    newcomer = make_role_user(Role.PHYSICIAN)
    url = reverse(
        "annotation:campaign_assignment_reassign", args=[campaign.pk, assignment.pk]
    )
    response = admin_client.post(url, {"physician": newcomer.pk})
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert not assignment.active
    new = Assignment.objects.get(reassigned_from=assignment)
    assert new.annotator == newcomer and new.active
    page = admin_client.get(detail_url(campaign)).content.decode()
    assert f"to {newcomer.username}." in page
    assert "(reassigned)" in page

    # The old one cannot be reassigned again.
    other = make_role_user(Role.PHYSICIAN)
    admin_client.post(url, {"physician": other.pk})
    assert not Assignment.objects.filter(annotator=other).exists()
    page = admin_client.get(detail_url(campaign)).content.decode()
    assert "This assignment was already reassigned." in page


def test_reassign_of_another_campaigns_assignment_is_404(
    admin_user, admin_client, campaign, physicians, gold_windows, assignment
):
    other = campaign_create(
        admin=admin_user, name="Other", windows=gold_windows, physicians=physicians
    )
    url = reverse(
        "annotation:campaign_assignment_reassign", args=[other.pk, assignment.pk]
    )
    response = admin_client.post(url, {"physician": physicians[1].pk})
    assert response.status_code == 404


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_non_admins_get_403_everywhere(
    client, role, campaign, assignment, gold_windows
):
    user = make_role_user(role)
    client.force_login(user)
    before = (Campaign.objects.count(), Assignment.objects.count())
    gets = [
        reverse("annotation:campaign_list"),
        reverse("annotation:campaign_new"),
        detail_url(campaign),
    ]
    for url in gets:
        assert client.get(url).status_code == 403, url
    posts = [
        (
            reverse("annotation:campaign_new"),
            {"name": "X", "annotators_per_window": 1, "physicians": [user.pk]},
        ),
        (
            reverse("annotation:campaign_assignment_add", args=[campaign.pk]),
            {"window": gold_windows[0].pk, "physician": user.pk},
        ),
        (
            reverse(
                "annotation:campaign_assignment_reassign",
                args=[campaign.pk, assignment.pk],
            ),
            {"physician": user.pk},
        ),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 403, url
    assert (Campaign.objects.count(), Assignment.objects.count()) == before


def test_campaigns_link_for_staff_only(client, admin_user, physicians, campaign):
    client.force_login(admin_user)
    html = client.get(reverse("annotation:campaign_list")).content.decode()
    assert f'href="{reverse("annotation:campaign_list")}" aria-current="page"' in html
    client.force_login(physicians[0])
    html = client.get(reverse("annotation:queue")).content.decode()
    assert ">Campaigns<" not in html
