"""Blindness for an admin who also rates (issue 30), proven by the canary crawl
of tests/annotation/test_blindness_canary.py over its world (canary_world.py).
R is an admin (a superuser, as the first admin is) who rates::

    campaign three: w0  R, A   (in dispute)
                    w1  R, A   (adjudicated by the other admin)
    campaign four:  w2  E, F   (in dispute: the control)

R's co-raters are A, B and D (w0's raters in every campaign): none of their
words may reach R on any page, partial, API or Django admin page, nor in the
answer to any adjudication post, until R's shared windows close; E's and F's
reach R's workspace of four's w2.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.roles import Role, roles_ensure
from annotation.models import (
    AdjudicationDecision,
    Assignment,
    ConsensusLabel,
    Label,
    LabelRevision,
)
from annotation.services import window_consensus_refresh

from .canary_world import (  # noqa: F401 - fixtures among them
    CONTROL,
    FIELDS,
    HTMX,
    _isolated,
    body_of,
    canary,
    client_of,
    close_shared_windows,
    close_window,
    crawl,
    leak_report,
    leaks_in,
    submit_items,
    world,
)
from .conftest import make_role_user
from .helpers import campaign_without_evidence

pytestmark = pytest.mark.django_db


# An admin who also rates (issue 30) -------------------------------------------

OWN_R = {field: [f"own item of r {code}"] for field, code in FIELDS.items()}
CONTROL_F = {field: [f"ctrl{code}fshown anuria"] for field, code in FIELDS.items()}


@pytest.fixture
def admin_world(world, matcher):
    """The world, and R: an admin (a superuser, as the first admin is) who also
    rates, in campaign three (see the module's docstring)."""
    admin, a, e = world["admin"], world["a"], world["e"]
    w = world["windows"]
    r = make_role_user(Role.ADMIN, is_superuser=True)
    r.groups.add(roles_ensure()[Role.PHYSICIAN])
    f = make_role_user(Role.PHYSICIAN)
    three = campaign_without_evidence(
        admin, "three", w[:2], [r, a], annotators_per_window=2
    )
    four = campaign_without_evidence(
        admin, "four", w[2:3], [e, f], annotators_per_window=2
    )
    canaries = dict(world["canaries"])
    for field in FIELDS:
        canaries[f"own item of b {field}"] = "b in one and two"
    for assignment in Assignment.objects.filter(
        campaign__in=[three, four]
    ).select_related("window"):
        who, index = assignment.annotator, assignment.window.index
        if who == a:
            items = {f_: [canary("a", 3, index, f_)] for f_ in FIELDS}
            for texts in items.values():
                canaries[texts[0]] = f"a in three w{index}"
        elif who == r:
            items = OWN_R
        else:
            items = CONTROL if who == e else CONTROL_F
        submit_items(who, assignment, items)
    window_consensus_refresh(campaign=three, window=w[0], matcher=matcher)
    window_consensus_refresh(campaign=four, window=w[2], matcher=matcher)
    close_window(admin, three, w[1], matcher)
    return {
        **world,
        "r": r,
        "f": f,
        "three": three,
        "four": four,
        "admin_canaries": canaries,
    }


def _admin_site_urls() -> list[str]:
    """Django's admin site as a superuser reads it: its index, every registered
    model's list, and the page of each label, revision and assignment (and
    of the first rows of every other model)."""
    from django.contrib import admin as admin_site

    urls = [reverse("admin:index")]
    for model in admin_site.site._registry:
        meta = model._meta
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        rows = model._default_manager.values_list("pk", flat=True)
        if model not in (Label, LabelRevision, Assignment):
            rows = rows[:20]
        urls += [
            reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk])
            for pk in rows
        ]
    return urls


def _adjudication_posts(client, campaigns) -> list[tuple[str, int, bytes]]:
    """Every adjudication post an admin can send on every window of the
    campaigns, plain and over htmx: accept each open dispute, settle the
    status, merge each task's clusters, recompute. The consensus is read from
    the database, as a forger would guess it."""
    sent = []
    for campaign in campaigns:
        for window_id in campaign.campaign_windows.values_list("window_id", flat=True):
            args = [campaign.pk, window_id]
            decide = reverse("annotation:adjudication_decide", args=args)
            merge = reverse("annotation:adjudication_merge", args=args)
            recompute = reverse("annotation:adjudication_recompute_window", args=args)
            consensus = ConsensusLabel.objects.filter(
                campaign=campaign, window_id=window_id
            ).first()
            posts = [(recompute, {})]
            if consensus is not None:
                posts.append(
                    (
                        decide,
                        {
                            "task": "status",
                            "action": "settle_status",
                            "new_status": "stable",
                            "reason": "probe",
                        },
                    )
                )
                for dispute in consensus.open_disputes:
                    posts.append(
                        (
                            decide,
                            {
                                "task": dispute["task"],
                                "item_ref": dispute["item_ref"],
                                "action": "accept",
                                "reason": "probe",
                            },
                        )
                    )
                for task, clusters in (consensus.agreement.clusters or {}).items():
                    posts.append(
                        (
                            merge,
                            {
                                "task": task,
                                "item_ref": [c["id"] for c in clusters],
                                "new_text": "probe wording",
                                "reason": "probe",
                            },
                        )
                    )
            for url, data in posts:
                for headers in ({}, HTMX):
                    response = client.post(url, data, **headers)
                    sent.append((url, response.status_code, body_of(response)))
    return sent


def test_no_canary_reaches_an_admin_who_rates_before_the_shared_windows_close(
    admin_world,
):
    world = admin_world
    r, three, w = world["r"], world["three"], world["windows"]
    canaries = world["admin_canaries"]
    four = world["four"]
    control = reverse("annotation:adjudication_window", args=[four.pk, w[2].pk])
    queue = reverse("annotation:adjudication_queue", args=[three.pk])

    found = crawl(world, r, canaries=canaries, answering=[control, queue])

    client = client_of(r)
    for url in _admin_site_urls():
        response = client.get(url)
        leaks = leaks_in(body_of(response), canaries)
        if leaks:
            found[f"admin site {url} ({response.status_code})"] = leaks
    campaigns = [world["one"], world["two"], three, four]
    decisions = set(AdjudicationDecision.objects.values_list("pk", flat=True))
    for url, status, body in _adjudication_posts(client, campaigns):
        leaks = leaks_in(body, canaries)
        if leaks:
            found[f"POST {url} ({status})"] = leaks
    assert not found, leak_report(found)

    # Nothing was decided on a window withheld from R: only the control's.
    by_r = AdjudicationDecision.objects.exclude(pk__in=decisions)
    assert set(by_r.values_list("campaign_id", "window_id")) == {(four.pk, w[2].pk)}
    # The control: the workspace R may open shows E's and F's words.
    page = client.get(control).content.decode().lower()
    assert CONTROL["acute_problems"][0] in page
    assert CONTROL_F["acute_problems"][0] in page
    # R's own open window is withheld, saying why, and the queue counts it.
    withheld = client.get(
        reverse("annotation:adjudication_window", args=[three.pk, w[0].pk])
    )
    assert withheld.status_code == 403
    assert "another admin adjudicates it" in withheld.content.decode()
    assert 'data-withheld-count="1"' in client.get(queue).content.decode()


def test_an_admin_who_rates_reads_the_labels_once_the_shared_windows_close(
    admin_world, matcher
):
    world = admin_world
    r, three, w = world["r"], world["three"], world["windows"]
    close_shared_windows(world, matcher)
    close_window(world["admin"], three, w[0], matcher)
    client = client_of(r)

    page = client.get(
        reverse("annotation:adjudication_window", args=[three.pk, w[0].pk])
    )

    assert page.status_code == 200
    assert canary("a", 3, 0, "acute_problems") in page.content.decode()
    label = Label.objects.get(
        assignment__campaign=three,
        assignment__window=w[0],
        assignment__annotator=world["a"],
    )
    change = reverse("admin:annotation_label_change", args=[label.pk])
    assert canary("a", 3, 0, "red_flags") in client.get(change).content.decode()
