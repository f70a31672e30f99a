"""Blindness proven by a canary crawl (spec section 4, issue 12): physicians
write unique canary strings into every free-text field of their labels; a
physician who shares windows with them (in two campaigns) then requests every
URL of every app, with every reading method, every term-suggestion prefix of
the canaries, the calibration pages and the researcher API. No response may
carry a canary until the shared windows are closed; after closing they reach
the co-rater where the rule allows (suggestions, calibration), and never a
physician outside the campaigns.

The world::

    campaign one: windows w0, w1       raters A, B on both
    campaign two: w0  A, D             (B rates w0 open in campaign one)
                  w1  A, B
                  w2  A, D             (A reuses one item of w1 here)
                  w3  A, E             (E shares nothing with B: the control)

Before the crawl campaign two's w0, w2 and w3 are adjudicated (a window closed
in one campaign while B still rates it in the other) and released as Gold. A
and D co-rate B's open windows: none of their words may reach B. E's words
may, and do (the control shows the crawl can see a leak).

An admin who also rates (issue 30), R, a superuser as the first admin is::

    campaign three: w0  R, A   (in dispute)
                    w1  R, A   (adjudicated by the other admin)
    campaign four:  w2  E, F   (in dispute: the control)

R's co-raters are A, B and D (w0's raters in every campaign): none of their
words may reach R on any page, partial, API or Django admin page, nor in the
answer to any adjudication post, until R's shared windows close; E's and F's
reach R's workspace of four's w2.
"""

from __future__ import annotations

import itertools

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from accounts.roles import Role, roles_ensure
from annotation.calibration import calibration_invite, calibration_set_draw
from annotation.models import (
    AdjudicationDecision,
    Assignment,
    CalibrationPair,
    CalibrationSet,
    Campaign,
    ConsensusLabel,
    Label,
    LabelRevision,
)
from annotation.services import (
    adjudication_decide,
    assignment_add,
    label_submit,
    window_consensus_refresh,
)
from exports.tokens import token_store
from tests.factories import make_admission, make_stay
from tests.test_forged_requests import site_routes

from .conftest import make_gold_windows, make_role_user
from .consensus_data import matcher  # noqa: F401
from .helpers import accept_items, campaign_without_evidence

pytestmark = pytest.mark.django_db

FIELDS = {"acute_problems": "p", "added_actions": "a", "red_flags": "f"}
HTMX = {"HTTP_HX_REQUEST": "true"}
REUSED = "zqreusedtext pneumothorax"
CONTROL = {
    field: [f"ctrl{code}visible sepsis", f"ctrl{code}shown delirium"]
    for field, code in FIELDS.items()
}
CONTROL_TEXTS = [text for texts in CONTROL.values() for text in texts]


def canary(author: str, campaign: int, window: int, field: str) -> str:
    """A string no one else writes: author, campaign, window and field in it."""
    return f"zq{author}{campaign}w{window}{FIELDS[field]}x pneumothorax"


@pytest.fixture(autouse=True)
def _isolated(settings, tmp_path):
    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    settings.REALICU_SUBMISSIONS_DIR = tmp_path / "submissions"
    cache.clear()


def _submit(physician, assignment, items: dict[str, list[str]]):
    payload = {"status": "stable", "action_ratings": []}
    for field in FIELDS:
        payload[field] = [{"text": t, "evidence": []} for t in items.get(field, [])]
    return label_submit(
        annotator=physician,
        assignment_id=assignment.pk,
        payload=payload,
        base_version=0,
    )


def _close(admin, campaign, window, matcher):
    """Agreement, then a decision on every open dispute: the window is
    adjudicated (or closed as agreed when there was none)."""
    window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    for dispute in consensus.open_disputes:
        if dispute["task"] == "status":
            adjudication_decide(
                admin=admin,
                campaign=campaign,
                window=window,
                task="status",
                item_ref="",
                action="settle_status",
                new_status="stable",
                reason="settled",
            )
        else:
            accept_items(
                admin, campaign, window, [dispute["item_ref"]], "kept", dispute["task"]
            )


@pytest.fixture
def world(matcher):
    admin = make_role_user(Role.ADMIN)
    a, b, d, e, outsider = (make_role_user(Role.PHYSICIAN) for _ in range(5))
    stay = make_stay(admission=make_admission(), hours=24)
    w = make_gold_windows(stay=stay, count=4)
    # Canaries are texts; their stay has no events.
    one = campaign_without_evidence(
        admin, "one", w[:2], [a, b], annotators_per_window=2
    )
    two = campaign_without_evidence(admin, "two", w, [a], annotators_per_window=1)
    for window, physician in ((w[0], d), (w[1], b), (w[2], d), (w[3], e)):
        assignment_add(admin=admin, window=window, campaign=two, physician=physician)

    canaries: dict[str, str] = {}  # canary -> where it was written
    names = {a.pk: "a", d.pk: "d"}
    campaigns = {one.pk: (1, one), two.pk: (2, two)}
    for assignment in Assignment.objects.select_related("window").order_by("pk"):
        number, campaign = campaigns[assignment.campaign_id]
        index = assignment.window.index
        who = assignment.annotator
        if who.pk in names:
            items = {f: [canary(names[who.pk], number, index, f)] for f in FIELDS}
            if who == a and (number, index) in ((1, 1), (2, 2)):
                items["acute_problems"].append(REUSED)
            for texts in items.values():
                for text in texts:
                    canaries[text] = f"{names[who.pk]} in {campaign.name} w{index}"
        elif who == e:
            items = CONTROL
        else:  # B writes words of its own
            items = {f: [f"own item of b {f}"] for f in FIELDS}
        _submit(who, assignment, items)

    for window in (w[0], w[2], w[3]):
        _close(admin, two, window, matcher)
    release = _gold_release(admin, two)
    # Drawn for a judge who rates nothing, so every window may give items; B
    # is invited afterwards and must be shown none of A's or D's words.
    judge = make_role_user(Role.PHYSICIAN)
    calibration = _calibration_set(admin, "before", [one, two], matcher, [judge])
    calibration_invite(admin=admin, calibration_set=calibration, judges=[b])
    return {
        "admin": admin,
        "a": a,
        "b": b,
        "d": d,
        "e": e,
        "outsider": outsider,
        "windows": w,
        "one": one,
        "two": two,
        "canaries": canaries,
        "release": release,
        "calibration": calibration,
        "stay": stay,
    }


def _gold_release(admin, campaign):
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.services import release_create

    return release_build(
        release=release_create(user=admin, kind=ReleaseKind.GOLD, campaign=campaign)
    )


def _calibration_set(admin, name, campaigns, matcher, judges) -> CalibrationSet:
    """A set drawn from the campaigns, with the judges invited to it."""
    return calibration_set_draw(
        admin=admin,
        name=name,
        campaigns=campaigns,
        matcher=matcher,
        per_stratum=200,
        band=0.5,
        seed=3,
        judges=judges,
    )


# The crawl --------------------------------------------------------------------


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def _values(world) -> dict[str, list]:
    from agents.models import AgentStayState
    from exports.models import Submission
    from oracle.models import OracleLabel, OracleRun

    release = world["release"]
    return {
        "assignment_id": list(Assignment.objects.values_list("pk", flat=True)),
        "campaign_id": list(Campaign.objects.values_list("pk", flat=True)),
        "window_id": [w.pk for w in world["windows"]],
        "set_id": list(CalibrationSet.objects.values_list("pk", flat=True)),
        "release_id": [release.pk],
        "file_path": list(release.files.values_list("path", flat=True)),
        "submission_id": list(Submission.objects.values_list("pk", flat=True)) or [1],
        "name": ["status"],
        "run_id": list(OracleRun.objects.values_list("pk", flat=True)) or [1],
        "label_id": list(OracleLabel.objects.values_list("pk", flat=True)) or [1],
        "stay_state_id": list(AgentStayState.objects.values_list("pk", flat=True))
        or [1],
        "job_id": [1],
        "backbone_id": [1],
        "import_run_id": [1],
        "build_run_id": [1],
        "draw_id": [1],
        "credential_id": [1],
        "attestation_id": [1],
        "stay_id": [world["stay"].pk],
        "index": [w.index for w in world["windows"]],
    }


def _urls(world) -> list[str]:
    values = _values(world)
    urls = []
    for route in site_routes():
        if route.name == "logout":
            continue
        for combo in itertools.product(*(values[p] for p in route.params)):
            urls.append(reverse(route.name, kwargs=dict(zip(route.params, combo))))
    return urls


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    key = token_store(user=user).key
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    return client


def _leaks(body: bytes, canaries: dict[str, str]) -> list[str]:
    text = body.decode("utf-8", "replace").lower()
    return [f"{c!r} ({where})" for c, where in canaries.items() if c.lower() in text]


def _prefixes(texts) -> set[str]:
    """Every prefix of every word of the texts: what typing them sends."""
    return {
        word[:n]
        for text in texts
        for word in text.split()
        for n in range(1, len(word) + 1)
    }


def _suggestion_urls(user, texts) -> list[str]:
    urls = []
    for assignment in Assignment.objects.filter(annotator=user):
        base = reverse("annotation:suggest", args=[assignment.pk])
        for field in FIELDS:
            for prefix in sorted(_prefixes(texts)):
                urls.append(f"{base}?field={field}&q={prefix}")
    return urls


def _calibration_walk(client) -> list[tuple[str, bytes]]:
    """The calibration list, and every pair of every set the user may judge,
    judged one after another as the page offers them."""
    seen = []
    response = client.get(reverse("annotation:calibration_list"))
    seen.append(("calibration list", _body(response)))
    for set_id in CalibrationSet.objects.values_list("pk", flat=True):
        url = reverse("annotation:calibration_judge", args=[set_id])
        post = reverse("annotation:calibration_judge_post", args=[set_id])
        response = client.get(url)
        seen.append((url, _body(response)))
        if response.status_code != 200:
            continue
        for _ in range(1000):
            pair = response.context.get("pair") if response.context else None
            if pair is None:
                break
            response = client.post(post, {"pair": pair.pk, "judgment": "same"}, **HTMX)
            seen.append((f"{post} after pair {pair.pk}", _body(response)))
    return seen


def crawl(world, user, *, canaries=None, answering=()) -> dict[str, list[str]]:
    """What each request of ``user`` showed of the canaries, by request. The
    user's own pages, and ``answering``, must have answered (a crawl of 404s
    proves nothing)."""
    client = _client(user)
    canaries = world["canaries"] if canaries is None else canaries
    found: dict[str, list[str]] = {}
    texts = [*canaries, *CONTROL_TEXTS]
    answered = set()
    for url in _urls(world):
        for label, headers in (("GET", {}), ("htmx GET", HTMX)):
            response = client.get(url, **headers)
            if response.status_code == 200:
                answered.add(url)
            leaks = _leaks(_body(response), canaries)
            if leaks:
                found[f"{label} {url} ({response.status_code})"] = leaks
    own = [
        reverse(name, args=[pk])
        for pk in Assignment.objects.filter(annotator=user, active=True).values_list(
            "pk", flat=True
        )
        for name in ("annotation:annotate", "annotation:suggest")
    ]
    expected = {
        reverse("annotation:queue"),
        reverse("windows:window_detail", args=[world["stay"].pk, 0]),
        *own,
        *answering,
    }
    assert expected <= answered, sorted(expected - answered)
    for url in _suggestion_urls(user, texts):
        leaks = _leaks(_body(client.get(url, **HTMX)), canaries)
        if leaks:
            found[f"suggest {url}"] = leaks
    for where, body in _calibration_walk(client):
        leaks = _leaks(body, canaries)
        if leaks:
            found[f"calibration {where}"] = leaks
    return found


def _report(found: dict[str, list[str]]) -> str:
    lines = [f"{len(found)} responses carry canaries:"]
    for request, leaks in list(found.items())[:40]:
        lines.append(f"  {request}: {', '.join(leaks[:3])}")
    return "\n".join(lines)


def _suggested(client, user, texts) -> str:
    return " ".join(
        _body(client.get(url, **HTMX)).decode().lower()
        for url in _suggestion_urls(user, texts)
    )


# Tests ------------------------------------------------------------------------


def test_no_canary_reaches_a_co_rater_before_the_shared_windows_close(world):
    found = crawl(world, world["b"])
    assert not found, _report(found)
    # The control: words of a physician who shares no window with B reach B's
    # suggestions, so the crawl would see a leak.
    suggested = _suggested(_client(world["b"]), world["b"], CONTROL_TEXTS)
    assert all(text in suggested for text in CONTROL_TEXTS)
    # and B was shown calibration pairs (and judged them), of E's words and
    # B's own only
    judged = CalibrationPair.objects.filter(judgments__judge=world["b"])
    assert judged.exists()
    texts = {t for p in judged for t in (p.text_a, p.text_b)}
    assert all(t.startswith(("ctrl", "own item of b")) for t in texts), texts


def test_no_canary_reaches_a_physician_outside_the_campaigns(world, matcher):
    found = crawl(world, world["outsider"])
    assert not found, _report(found)
    _close_all(world, matcher)
    found = crawl(world, world["outsider"])
    assert not found, _report(found)


def _close_all(world, matcher):
    one, two, w = world["one"], world["two"], world["windows"]
    for campaign, window in ((one, w[0]), (one, w[1]), (two, w[1])):
        _close(world["admin"], campaign, window, matcher)


def test_after_the_shared_windows_close_the_canaries_reach_the_co_rater(world, matcher):
    b = world["b"]
    _close_all(world, matcher)
    client = _client(b)

    # Suggestions: every canary of the campaigns B works in.
    suggested = _suggested(client, b, world["canaries"])
    missing = [c for c in world["canaries"] if c.lower() not in suggested]
    assert not missing, missing

    # Calibration: a set drawn now pairs the canaries, and B, invited, judges them.
    _calibration_set(
        world["admin"], "after", [world["one"], world["two"]], matcher, judges=[b]
    )
    shown = b"".join(body for _, body in _calibration_walk(client))
    assert _leaks(shown, world["canaries"])


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
        _submit(who, assignment, items)
    window_consensus_refresh(campaign=three, window=w[0], matcher=matcher)
    window_consensus_refresh(campaign=four, window=w[2], matcher=matcher)
    _close(admin, three, w[1], matcher)
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
                    sent.append((url, response.status_code, _body(response)))
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

    client = _client(r)
    for url in _admin_site_urls():
        response = client.get(url)
        leaks = _leaks(_body(response), canaries)
        if leaks:
            found[f"admin site {url} ({response.status_code})"] = leaks
    campaigns = [world["one"], world["two"], three, four]
    decisions = set(AdjudicationDecision.objects.values_list("pk", flat=True))
    for url, status, body in _adjudication_posts(client, campaigns):
        leaks = _leaks(body, canaries)
        if leaks:
            found[f"POST {url} ({status})"] = leaks
    assert not found, _report(found)

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
    _close_all(world, matcher)
    _close(world["admin"], three, w[0], matcher)
    client = _client(r)

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
