"""An admin who also rates is blind like a physician (issue 30,
annotation.blindness): a window whose labels include a co-rater's is withheld
from their adjudication (left out of their queue, its workspace a 403 saying
why, no decision, merge or recompute), another admin adjudicates it, and
their own label cannot be reopened once the co-raters' labels can reach them."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from accounts.roles import Role, roles_ensure
from annotation.blindness import (
    ADJUDICATION_WITHHELD,
    adjudication_withheld,
    co_rater_labels_visible,
)
from annotation.models import AdjudicationDecision, ConsensusLabel
from annotation.selectors.disputes import adjudication_queue
from annotation.services import (
    assignment_add,
    label_reopen,
    label_submit,
    window_consensus_refresh,
)
from annotation.services.adjudication import adjudication_merge

from .conftest import make_role_user
from .helpers import accept_items

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PROBLEMS = "acute_problems"
TEXTS = ("Septic shock", "Pneumothorax", "Hypoglycaemia")


@pytest.fixture
def rater_admin(db):
    """An admin (a superuser, as the first admin is) who also rates."""
    user = make_role_user(Role.ADMIN, is_superuser=True)
    user.groups.add(roles_ensure()[Role.PHYSICIAN])
    return user


def _submit(user, campaign, window, payload, text, status="deteriorating"):
    assignment = campaign.assignments.get(annotator=user, window=window)
    problem = {**payload[PROBLEMS][0], "text": text}
    return label_submit(
        annotator=user,
        assignment_id=assignment.pk,
        payload={**payload, "status": status, PROBLEMS: [problem]},
        base_version=0,
    )


@pytest.fixture
def disputed(
    admin_user, rater_admin, physicians, campaign, gold_windows, complete_payload
):
    """Window 0 rated by both physicians and the admin who rates, window 1 by
    the physicians only: each window's problems all differ, agreement
    computed (open disputes on both)."""
    w0, w1 = gold_windows[:2]
    assignment_add(
        admin=admin_user, window=w0, campaign=campaign, physician=rater_admin
    )
    for n, user in enumerate([*physicians, rater_admin]):
        _submit(user, campaign, w0, complete_payload, TEXTS[n])
    unrated = {**complete_payload, "action_ratings": []}  # w1 records no action
    for n, user in enumerate(physicians):
        _submit(user, campaign, w1, unrated, TEXTS[n])
    return {"w0": w0, "w1": w1}


@pytest.fixture
def computed(disputed, campaign, matcher):
    for window in disputed.values():
        window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    return disputed


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _urls(campaign, window) -> dict[str, str]:
    args = [campaign.pk, window.pk]
    return {
        "window": reverse("annotation:adjudication_window", args=args),
        "decide": reverse("annotation:adjudication_decide", args=args),
        "merge": reverse("annotation:adjudication_merge", args=args),
        "recompute": reverse("annotation:adjudication_recompute_window", args=args),
    }


def _refs(campaign, window) -> list[str]:
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    return [d["item_ref"] for d in consensus.open_disputes if d["task"] == PROBLEMS]


def test_the_window_an_admin_rates_is_withheld_from_their_adjudication(
    rater_admin, campaign, computed
):
    client = _client(rater_admin)
    urls = _urls(campaign, computed["w0"])
    refs = _refs(campaign, computed["w0"])

    page = client.get(urls["window"])
    partial = client.get(urls["window"], **HTMX)
    posts = [
        client.post(
            urls["decide"],
            {"task": PROBLEMS, "item_ref": refs[0], "action": "accept", "reason": "x"},
        ),
        client.post(
            urls["merge"],
            {"task": PROBLEMS, "item_ref": refs, "new_text": "x", "reason": "x"},
            **HTMX,
        ),
        client.post(urls["recompute"]),
    ]

    assert page.status_code == partial.status_code == 403
    assert "another admin adjudicates it" in page.content.decode()
    for response in (page, partial, *posts):
        body = response.content.decode()
        assert not any(text in body for text in TEXTS[:2]), response
    assert [p.status_code for p in posts] == [403, 403, 403]
    assert not AdjudicationDecision.objects.exists()


def test_so_is_every_window_a_co_rater_labelled(rater_admin, campaign, computed):
    # The physicians rate window 0 with the admin: their words on window 1 are
    # a co-rater's words too (a text can be reused).
    assert adjudication_withheld(
        user=rater_admin, campaign_id=campaign.pk, window_id=computed["w1"].pk
    )
    response = _client(rater_admin).get(_urls(campaign, computed["w1"])["window"])
    assert response.status_code == 403
    assert "Pneumothorax" not in response.content.decode()


def test_the_queue_leaves_them_out_and_counts_them(
    admin_user, rater_admin, campaign, computed
):
    url = reverse("annotation:adjudication_queue", args=[campaign.pk])

    mine = _client(rater_admin).get(url).content.decode()
    others = _client(admin_user).get(url).content.decode()

    assert adjudication_queue(admin=rater_admin, campaign=campaign) == []
    assert 'data-queue-count="0"' in mine
    assert 'data-withheld-count="2"' in mine
    assert f'data-window-id="{computed["w0"].pk}"' not in mine
    assert 'data-queue-count="2"' in others
    assert "data-withheld-count" not in others


def test_the_services_refuse_the_admin_who_rates_and_write_nothing(
    rater_admin, campaign, computed
):
    window = computed["w0"]
    refs = _refs(campaign, window)
    before = ConsensusLabel.objects.get(campaign=campaign, window=window).items

    with pytest.raises(PermissionDenied, match="another admin adjudicates it"):
        accept_items(rater_admin, campaign, window, [refs[0]], "mine")
    with pytest.raises(PermissionDenied) as refused:
        adjudication_merge(
            admin=rater_admin,
            campaign=campaign,
            window=window,
            task=PROBLEMS,
            item_refs=refs,
            new_text="Shock",
            reason="same",
        )

    assert str(refused.value) == ADJUDICATION_WITHHELD
    assert not AdjudicationDecision.objects.exists()
    assert ConsensusLabel.objects.get(campaign=campaign, window=window).items == before


def test_another_admin_adjudicates_it(admin_user, campaign, computed):
    window = computed["w0"]
    page = _client(admin_user).get(_urls(campaign, window)["window"])
    assert page.status_code == 200
    assert all(text in page.content.decode() for text in TEXTS)


def test_the_admin_who_rates_may_reopen_until_the_co_raters_labels_reach_them(
    admin_user, rater_admin, campaign, computed
):
    window = computed["w0"]
    assignment = campaign.assignments.get(annotator=rater_admin, window=window)
    assert not co_rater_labels_visible(
        user=rater_admin, campaign_id=campaign.pk, window_id=window.pk
    )
    # An admin who rates nothing reads them: for them they are visible.
    assert co_rater_labels_visible(
        user=admin_user, campaign_id=campaign.pk, window_id=window.pk
    )

    label_reopen(annotator=rater_admin, assignment_id=assignment.pk)

    assert campaign.assignments.get(pk=assignment.pk).state == "draft"


def test_once_the_window_closes_the_admin_who_rates_reads_it_and_cannot_reopen(
    admin_user, rater_admin, physicians, campaign, computed, complete_payload
):
    for window in computed.values():
        accept_items(admin_user, campaign, window, _refs(campaign, window), "kept")
    window = computed["w0"]
    assignment = campaign.assignments.get(annotator=rater_admin, window=window)

    page = _client(rater_admin).get(_urls(campaign, window)["window"])

    assert page.status_code == 200
    assert "Pneumothorax" in page.content.decode()
    assert co_rater_labels_visible(
        user=rater_admin, campaign_id=campaign.pk, window_id=window.pk
    )
    with pytest.raises(ValidationError, match="can no longer be reopened"):
        label_reopen(annotator=rater_admin, assignment_id=assignment.pk)
