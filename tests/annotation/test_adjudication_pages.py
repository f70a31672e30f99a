"""The admin's adjudication pages: the queue of exactly the disputed windows,
the window page with the physicians' labels side by side and a form for each
disputed field only, decisions through htmx with their reasons and authors,
refusals that change nothing, the next window of the queue, and 404s for
everyone but admins."""

import pytest
from django.urls import reverse

from accounts.roles import Role, roles_ensure
from annotation.models import (
    AdjudicationDecision,
    Assignment,
    CampaignPhysician,
    ConsensusLabel,
    Label,
)
from annotation.selectors.disputes import adjudication_queue

from .conftest import make_role_user

# The labelled campaign of the consensus tests: w0, w1 and w3 disagree, w2 not.
from .consensus_data import stay  # noqa: F401 - stay, a fixture
from .helpers import written_state

PROBLEMS = "acute_problems"
HTMX = {"HTTP_HX_REQUEST": "true"}


def _urls(campaign, window):
    return {
        "queue": reverse("annotation:adjudication_queue", args=[campaign.pk]),
        "window": reverse(
            "annotation:adjudication_window", args=[campaign.pk, window.pk]
        ),
        "decide": reverse(
            "annotation:adjudication_decide", args=[campaign.pk, window.pk]
        ),
        "recompute_window": reverse(
            "annotation:adjudication_recompute_window", args=[campaign.pk, window.pk]
        ),
        "irr": reverse("annotation:irr_dashboard", args=[campaign.pk]),
        "recompute": reverse("annotation:campaign_recompute", args=[campaign.pk]),
        "progress": reverse(
            "annotation:campaign_recompute_progress", args=[campaign.pk]
        ),
    }


def _dispute(campaign, window, task):
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    return next(d for d in consensus.open_disputes if d["task"] == task)


def test_queue_lists_exactly_the_disputed_windows_with_their_count(
    admin_client, labelled, windows
):
    response = admin_client.get(_urls(labelled, windows[0])["queue"])

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-queue-count="3"' in html
    for window in (windows[0], windows[1], windows[3]):
        assert f'data-window-id="{window.pk}"' in html
    assert f'data-window-id="{windows[2].pk}"' not in html


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_adjudication_pages_are_403_for_physicians_and_researchers(
    client, labelled, windows, role
):
    before = written_state()
    decisions = AdjudicationDecision.objects.count()
    client.force_login(make_role_user(role))
    urls = _urls(labelled, windows[3])

    for name in ("queue", "window", "irr", "progress"):
        assert client.get(urls[name]).status_code == 403, name
    posted = client.post(
        urls["decide"],
        {
            "task": "status",
            "action": "settle_status",
            "new_status": "stable",
            "reason": "x",
        },
    )
    assert posted.status_code == 403
    assert client.post(urls["recompute"]).status_code == 403
    assert client.post(urls["recompute_window"]).status_code == 403
    assert written_state() == before
    assert AdjudicationDecision.objects.count() == decisions


def test_anonymous_users_are_sent_to_log_in(client, labelled, windows):
    response = client.get(_urls(labelled, windows[0])["queue"])
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_window_page_shows_the_labels_side_by_side_with_forms_only_for_disputes(
    admin_client, labelled, windows, physicians
):
    response = admin_client.get(_urls(labelled, windows[0])["window"])

    html = response.content.decode()
    assert response.status_code == 200
    for physician in physicians:
        assert physician.username in html
    # Septic shock and Shock due to sepsis share cluster 1, shown as matched.
    assert "Septic shock" in html and "Shock due to sepsis" in html
    assert html.count("matched · kept") == 4  # a problem, two actions, a red flag
    # Two open disputes on w0 (Respiratory failure, the ventilator), and the
    # status is agreed: two item forms and no status form.
    assert html.count("data-dispute ") == 2
    assert 'data-dispute-kind="status"' not in html
    assert 'data-window-state="open"' in html


def test_window_with_a_status_dispute_asks_to_settle_it(
    admin_client, labelled, windows
):
    html = admin_client.get(_urls(labelled, windows[3])["window"]).content.decode()

    assert 'data-dispute-kind="status"' in html
    assert 'data-status="stable"' in html and 'data-status="deteriorating"' in html
    assert 'data-window-action="third"' in html
    assert 'data-window-action="drop"' in html


def test_window_outside_the_campaign_is_404(admin_client, labelled, windows):
    url = reverse("annotation:adjudication_window", args=[labelled.pk, 999999])
    assert admin_client.get(url).status_code == 404


def test_settling_the_status_over_htmx_records_the_decision_and_shows_it(
    admin_client, labelled, windows, admin_user
):
    urls = _urls(labelled, windows[3])
    labels_before = written_state()

    response = admin_client.post(
        urls["decide"],
        {
            "task": "status",
            "action": "settle_status",
            "new_status": "deteriorating",
            "reason": "Lactate rising on two samples",
        },
        **HTMX,
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="adjudication-workspace"')
    decision = AdjudicationDecision.objects.get(window=windows[3])
    assert decision.action == "settle_status"
    assert decision.new_status == "deteriorating"
    assert decision.author == admin_user
    assert f'data-decision-id="{decision.pk}"' in html
    assert admin_user.username in html
    assert "Lactate rising on two samples" in html
    consensus = ConsensusLabel.objects.get(campaign=labelled, window=windows[3])
    assert consensus.status == "deteriorating"
    assert written_state() == labels_before  # the physicians' labels stay


def test_a_decision_without_reason_is_refused_and_nothing_is_written(
    admin_client, labelled, windows
):
    urls = _urls(labelled, windows[3])
    before = ConsensusLabel.objects.get(campaign=labelled, window=windows[3])

    response = admin_client.post(
        urls["decide"],
        {
            "task": "status",
            "action": "settle_status",
            "new_status": "stable",
            "reason": "  ",
        },
        **HTMX,
    )

    assert response.status_code == 200
    assert "Give a reason for the decision" in response.content.decode()
    assert not AdjudicationDecision.objects.exists()
    after = ConsensusLabel.objects.get(campaign=labelled, window=windows[3])
    assert after.dispute_count == before.dispute_count


def test_a_rewrite_without_text_and_an_unknown_item_are_refused(
    admin_client, labelled, windows
):
    urls = _urls(labelled, windows[0])
    ref = _dispute(labelled, windows[0], PROBLEMS)["item_ref"]

    empty = admin_client.post(
        urls["decide"],
        {
            "task": PROBLEMS,
            "item_ref": ref,
            "action": "rewrite",
            "new_text": "",
            "reason": "clearer",
        },
        **HTMX,
    )
    unknown = admin_client.post(
        urls["decide"],
        {"task": PROBLEMS, "item_ref": "0/none/0", "action": "accept", "reason": "ok"},
        **HTMX,
    )

    assert "A rewrite needs the new text" in empty.content.decode()
    assert "is not an open dispute" in unknown.content.decode()
    assert not AdjudicationDecision.objects.exists()


def test_a_third_physician_must_be_of_the_campaign(admin_client, labelled, windows):
    outsider = make_role_user(Role.PHYSICIAN)
    assignments = Assignment.objects.count()

    response = admin_client.post(
        _urls(labelled, windows[3])["decide"],
        {
            "task": "window",
            "action": "request_third_rater",
            "reason": "tie",
            "physician": outsider.pk,
        },
        **HTMX,
    )

    assert "Choose a physician of this campaign" in response.content.decode()
    assert Assignment.objects.count() == assignments
    assert not AdjudicationDecision.objects.exists()


def test_the_adjudicator_is_neither_offered_nor_chosen_as_the_third_physician(
    admin_client, admin_user, labelled, windows
):
    # An admin who is also one of the campaign's physicians, free on window 3.
    admin_user.groups.add(roles_ensure()[Role.PHYSICIAN])
    CampaignPhysician.objects.create(campaign=labelled, user=admin_user)
    urls = _urls(labelled, windows[3])
    assignments = Assignment.objects.count()

    page = admin_client.get(urls["window"]).content.decode()
    third = page.split('data-window-action="third"')[1].split("</form>")[0]
    named = admin_client.post(
        urls["decide"],
        {
            "task": "window",
            "action": "request_third_rater",
            "reason": "tie",
            "physician": admin_user.pk,
        },
        **HTMX,
    )
    chosen = admin_client.post(
        urls["decide"],
        {"task": "window", "action": "request_third_rater", "reason": "tie"},
        **HTMX,
    )

    assert f'value="{admin_user.pk}"' not in third
    assert "or is you (the adjudicator)" in third
    assert "You adjudicate this window" in named.content.decode()
    # The campaign's other physicians rate the window already: nobody to ask.
    assert "already been assigned this window" in chosen.content.decode()
    assert Assignment.objects.count() == assignments
    assert not AdjudicationDecision.objects.exists()


def test_text_typed_with_another_choice_is_not_a_rewrite(
    admin_client, labelled, windows
):
    ref = _dispute(labelled, windows[1], "red_flags")["item_ref"]

    admin_client.post(
        _urls(labelled, windows[1])["decide"],
        {
            "task": "red_flags",
            "item_ref": ref,
            "action": "accept",
            "new_text": "Avoid nephrotoxic drugs",
            "reason": "AKI risk",
        },
        **HTMX,
    )

    decision = AdjudicationDecision.objects.get()
    assert decision.action == "accept" and decision.new_text == ""


def test_after_the_last_dispute_next_window_leads_to_the_next_in_the_queue(
    admin_client, labelled, windows
):
    urls = _urls(labelled, windows[1])
    ref = _dispute(labelled, windows[1], "red_flags")["item_ref"]

    response = admin_client.post(
        urls["decide"],
        {
            "task": "red_flags",
            "item_ref": ref,
            "action": "rewrite",
            "new_text": "Avoid nephrotoxins",
            "reason": "Creatinine rising",
        },
        **HTMX,
    )

    html = response.content.decode()
    assert 'data-window-state="settled"' in html
    assert f'data-next-window="{windows[3].pk}"' in html
    assert windows[1].pk not in [
        c.window_id
        for c in adjudication_queue(admin=labelled.created_by, campaign=labelled)
    ]
    queue = admin_client.get(urls["queue"]).content.decode()
    assert 'data-queue-count="2"' in queue


def test_a_plain_form_post_redirects_back_to_the_window(
    admin_client, labelled, windows
):
    urls = _urls(labelled, windows[3])

    response = admin_client.post(
        urls["decide"],
        {"task": "window", "action": "drop_window", "reason": "Unsettleable"},
    )

    assert response.status_code == 302
    assert response["Location"] == urls["window"]
    assert ConsensusLabel.objects.get(campaign=labelled, window=windows[3]).dropped
    page = admin_client.get(urls["window"]).content.decode()
    assert 'data-window-state="dropped"' in page
    assert "data-dispute " not in page


def test_recompute_of_one_window_rebuilds_its_consensus(
    admin_client, labelled, windows
):
    urls = _urls(labelled, windows[0])
    ConsensusLabel.objects.filter(campaign=labelled, window=windows[0]).delete()

    response = admin_client.post(urls["recompute_window"])

    assert response.status_code == 302
    assert (
        ConsensusLabel.objects.get(campaign=labelled, window=windows[0]).dispute_count
        == 2
    )


def test_campaign_detail_links_to_the_queue_and_the_dashboard(
    admin_client, labelled, windows
):
    html = admin_client.get(
        reverse("annotation:campaign_detail", args=[labelled.pk])
    ).content.decode()

    assert _urls(labelled, windows[0])["queue"] in html
    assert _urls(labelled, windows[0])["irr"] in html


def test_window_page_of_a_window_awaiting_a_third_label_says_who_is_awaited(
    admin_client, labelled, windows, physicians, admin_user
):
    third = make_role_user(Role.PHYSICIAN)
    labelled.campaign_physicians.create(user=third)
    admin_client.post(
        _urls(labelled, windows[3])["decide"],
        {
            "task": "window",
            "action": "request_third_rater",
            "reason": "Tie",
            "physician": "",
        },
        **HTMX,
    )

    html = admin_client.get(_urls(labelled, windows[3])["window"]).content.decode()

    assert 'data-window-state="waiting"' in html
    assert f"Waiting for: <strong>{third.username}</strong>" in html
    assert "Ask a third physician" in html  # the decision, in the history
    assert Label.objects.filter(assignment__window=windows[3]).count() == 2
