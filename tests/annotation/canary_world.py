"""The world of the blindness canary tests and their crawl: physicians' unique
canary strings in every free-text field of their labels in two campaigns (the
world is drawn in test_blindness_canary.py's docstring), and a crawl that
requests, as one user, every URL of every app with every reading method, every
term-suggestion prefix, the calibration pages and the researcher API, and
reports the responses that carry a canary. Fixtures: a module takes ``world``
and ``_isolated`` with ``from .canary_world import ...``."""

from __future__ import annotations

import itertools

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from accounts.roles import Role
from annotation.calibration import calibration_invite, calibration_set_draw
from annotation.models import Assignment, CalibrationSet, Campaign, ConsensusLabel
from annotation.services import (
    adjudication_decide,
    assignment_add,
    label_submit,
    window_consensus_refresh,
)
from exports.tokens import token_store
from tests.factories import make_admission, make_stay
from tests.forged import site_routes

from .conftest import make_gold_windows, make_role_user
from .helpers import accept_items, campaign_without_evidence

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


def submit_items(physician, assignment, items: dict[str, list[str]]):
    payload = {"status": "stable", "action_ratings": []}
    for field in FIELDS:
        payload[field] = [{"text": t, "evidence": []} for t in items.get(field, [])]
    return label_submit(
        annotator=physician,
        assignment_id=assignment.pk,
        payload=payload,
        base_version=0,
    )


def close_window(admin, campaign, window, matcher):
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
        submit_items(who, assignment, items)

    for window in (w[0], w[2], w[3]):
        close_window(admin, two, window, matcher)
    release = _gold_release(admin, two)
    # Drawn for a judge who rates nothing, so every window may give items; B
    # is invited afterwards and must be shown none of A's or D's words.
    judge = make_role_user(Role.PHYSICIAN)
    calibration = draw_calibration_set(admin, "before", [one, two], matcher, [judge])
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


def draw_calibration_set(admin, name, campaigns, matcher, judges) -> CalibrationSet:
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


def body_of(response) -> bytes:
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


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    key = token_store(user=user).key
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    return client


def leaks_in(body: bytes, canaries: dict[str, str]) -> list[str]:
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


def calibration_walk(client) -> list[tuple[str, bytes]]:
    """The calibration list, and every pair of every set the user may judge,
    judged one after another as the page offers them."""
    seen = []
    response = client.get(reverse("annotation:calibration_list"))
    seen.append(("calibration list", body_of(response)))
    for set_id in CalibrationSet.objects.values_list("pk", flat=True):
        url = reverse("annotation:calibration_judge", args=[set_id])
        post = reverse("annotation:calibration_judge_post", args=[set_id])
        response = client.get(url)
        seen.append((url, body_of(response)))
        if response.status_code != 200:
            continue
        for _ in range(1000):
            pair = response.context.get("pair") if response.context else None
            if pair is None:
                break
            response = client.post(post, {"pair": pair.pk, "judgment": "same"}, **HTMX)
            seen.append((f"{post} after pair {pair.pk}", body_of(response)))
    return seen


def crawl(world, user, *, canaries=None, answering=()) -> dict[str, list[str]]:
    """What each request of ``user`` showed of the canaries, by request. The
    user's own pages, and ``answering``, must have answered (a crawl of 404s
    proves nothing)."""
    client = client_of(user)
    canaries = world["canaries"] if canaries is None else canaries
    found: dict[str, list[str]] = {}
    texts = [*canaries, *CONTROL_TEXTS]
    answered = set()
    for url in _urls(world):
        for label, headers in (("GET", {}), ("htmx GET", HTMX)):
            response = client.get(url, **headers)
            if response.status_code == 200:
                answered.add(url)
            leaks = leaks_in(body_of(response), canaries)
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
        leaks = leaks_in(body_of(client.get(url, **HTMX)), canaries)
        if leaks:
            found[f"suggest {url}"] = leaks
    for where, body in calibration_walk(client):
        leaks = leaks_in(body, canaries)
        if leaks:
            found[f"calibration {where}"] = leaks
    return found


def leak_report(found: dict[str, list[str]]) -> str:
    lines = [f"{len(found)} responses carry canaries:"]
    for request, leaks in list(found.items())[:40]:
        lines.append(f"  {request}: {', '.join(leaks[:3])}")
    return "\n".join(lines)


def suggested_texts(client, user, texts) -> str:
    return " ".join(
        body_of(client.get(url, **HTMX)).decode().lower()
        for url in _suggestion_urls(user, texts)
    )


def close_shared_windows(world, matcher):
    one, two, w = world["one"], world["two"], world["windows"]
    for campaign, window in ((one, w[0]), (one, w[1]), (two, w[1])):
        close_window(world["admin"], campaign, window, matcher)
