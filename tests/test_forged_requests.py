"""Forged requests against every URL of the site, walked from the URL resolver:
each role (anonymous, physician, researcher, admin) with each method, ids of
objects made here, ids that belong to someone else or to another parent, and
ids that are zero, huge or not numbers. Nothing may answer 500, a role that
may not use an admin page never gets a 2xx from it, and a refused request
writes nothing (row counts of every model of the four apps unchanged)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accounts.roles import Role
from agents.models import AgentRun, AgentStayState
from annotation.models import CalibrationDraw, CalibrationPair, CalibrationSet, Label
from annotation.services import (
    MAX_ACTIVE_SECONDS_PER_SAVE,
    campaign_create,
    label_save_draft,
)
from datause import services as datause_services
from exports.building import release_build
from exports.models import ApiToken, ReleaseKind, Submission
from exports.services import release_create
from exports.tokens import token_store
from oracle.models import ValidationJob
from tests.annotation.conftest import make_gold_windows, make_role_user
from tests.exports.helpers import make_oracle_run, oracle_payload
from tests.factories import make_admission, make_stay
from windows.datasources import MIMIC_IV, data_source_get
from windows.models import BuildKind, BuildRun, ImportRun, Source
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "physician", "researcher", "admin")
METHODS = ("get", "post", "put", "delete")
APPS = (
    "windows",
    "annotation",
    "oracle",
    "exports",
    "evaluation",
    "agents",
    "surveillance",
    "datause",
    "auth",
)

# Pages only an admin may open: anyone signed in with another role gets a 403
# (accounts.access: a wrong role is a 403), never a 2xx.
ADMIN_ONLY = {
    "annotation:campaign_list",
    "annotation:campaign_new",
    "annotation:campaign_detail",
    "annotation:campaign_assignment_add",
    "annotation:campaign_assignment_reassign",
    "annotation:adjudication_queue",
    "annotation:adjudication_window",
    "annotation:adjudication_decide",
    "annotation:adjudication_merge",
    "annotation:adjudication_recompute_window",
    "annotation:irr_dashboard",
    "annotation:campaign_recompute",
    "annotation:campaign_recompute_progress",
    "annotation:calibration_draw",
    "annotation:calibration_draw_progress",
    "annotation:calibration_report",
    "annotation:calibration_adopt",
    "annotation:calibration_invite",
    "annotation:calibration_invitation_withdraw",
    "oracle:run_list",
    "oracle:run_new",
    "oracle:run_detail",
    "oracle:run_labels",
    "oracle:run_label",
    "oracle:run_progress",
    "oracle:run_cancel",
    "oracle:run_resume",
    "oracle:run_retry_failed",
    "oracle:run_validation",
    "oracle:run_validate",
    "oracle:validation_progress",
    "oracle:backbone_list",
    "oracle:backbone_new",
    "oracle:backbone_edit",
    "exports:submission_budget",
    "windows:import_list",
    "windows:import_start",
    "windows:import_progress",
    "windows:import_resume",
    "windows:import_cancel",
    "windows:build_resume",
    "windows:build_cancel",
    "exports_api:oracle_run_list",
    "exports_api:oracle_run_detail",
    "exports:release_build_start",
    "exports:release_new",
    "exports:release_retry",
    "exports:release_rebuild",
    "exports:release_cancel",
    "agents:run_start",
    "surveillance:stay_checkpoints",
    "datause:audit",
    "datause:credential_approve",
    "datause:attestation_approve",
}
# Agent runs and online evaluations: admins and researchers, never physicians
# (an agent's predictions are model labels: blindness).
NOT_FOR_PHYSICIANS = {
    "agents:run_list",
    "agents:endpoint_start",
    "agents:run_detail",
    "agents:run_cancel",
    "agents:run_resume",
    "agents:stay_memory",
    "datause:data_use",
    "datause:credential_record",
    "datause:credential_revoke",
    "datause:attestation_record",
    "datause:attestation_revoke",
}
# Pages of labelled data that a researcher (or anyone but a physician / admin)
# may not use either.
NOT_FOR_RESEARCHERS = {
    "annotation:queue",
    "annotation:annotate",
    "annotation:draft",
    "annotation:submit",
    "annotation:reopen",
    "annotation:suggest",
    "annotation:calibration_list",
    "annotation:calibration_judge",
    "annotation:calibration_judge_post",
    "windows:stay_list",
    "windows:stay_detail",
    "windows:window_detail",
    "windows:stay_tracks_json",
}


@dataclass(frozen=True)
class Route:
    name: str
    route: str
    params: tuple[str, ...]


def site_routes() -> list[Route]:
    """Every named URL pattern of the project, Django's own admin left out."""
    found: list[Route] = []

    def walk(patterns, prefix: str, namespace: str | None):
        for p in patterns:
            if isinstance(p, URLResolver):
                if getattr(p, "app_name", None) == "admin":
                    continue
                ns = p.namespace or namespace
                walk(p.url_patterns, prefix + str(p.pattern), ns)
            elif isinstance(p, URLPattern) and p.name:
                name = f"{namespace}:{p.name}" if namespace else p.name
                found.append(
                    Route(name, prefix + str(p.pattern), tuple(p.pattern.converters))
                )

    walk(get_resolver().url_patterns, "", None)
    return found


def model_counts() -> dict[str, int]:
    """Every table's row count, in one query: asked before and after each of
    thousands of forged requests (a query per model made this file's walks
    take minutes)."""
    models = [m for m in apps.get_models() if m._meta.app_label in APPS]
    quote = connection.ops.quote_name
    counts = ", ".join(
        f"(SELECT COUNT(*) FROM {quote(m._meta.db_table)})" for m in models
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        row = cursor.fetchone()
    return {m._meta.label: n for m, n in zip(models, row, strict=True)}


@pytest.fixture(autouse=True)
def _isolated(settings, tmp_path):
    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    settings.REALICU_SUBMISSIONS_DIR = tmp_path / "submissions"
    # Many requests in a row: the API's rate limit is not what is tested here.
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def world(db):
    """Users of each role, a two-physician campaign over two Gold windows with a
    draft by the first physician, a window outside the campaign, two Oracle
    runs (the second with a validation job), a built release with a
    submission, a calibration set and an import run."""
    admin = make_role_user(Role.ADMIN)
    researcher = make_role_user(Role.RESEARCHER)
    owner, co_rater, outsider = (make_role_user(Role.PHYSICIAN) for _ in range(3))
    stay = make_stay(admission=make_admission(), hours=6)
    gold = make_gold_windows(stay=stay, count=2)
    other_stay = make_stay(admission=make_admission(), hours=2)
    outside = windows_build(stay=other_stay)[0]
    campaign = campaign_create(
        admin=admin,
        name="forged",
        windows=[w.pk for w in gold],
        physicians=[owner, co_rater],
        annotators_per_window=2,
        evidence_required=False,  # forged requests, not citing, are under test
    )
    mine = campaign.assignments.get(annotator=owner, window=gold[0])
    theirs = campaign.assignments.get(annotator=co_rater, window=gold[0])
    label_save_draft(
        annotator=co_rater,
        assignment_id=theirs.pk,
        payload={"status": "improving", "acute_problems": [{"text": "Secret item"}]},
        base_version=0,
    )
    run = make_oracle_run(
        admin=admin,
        labels={
            w: ("deteriorating", oracle_payload(problems=["OracleOnly"])) for w in gold
        },
        name="run-a",
    )
    other_run = make_oracle_run(
        admin=admin, labels={gold[0]: ("stable", oracle_payload())}, name="run-b"
    )
    job = ValidationJob.objects.create(run=run, campaign=campaign, created_by=admin)
    other_job = ValidationJob.objects.create(
        run=other_run, campaign=campaign, created_by=admin
    )
    release = release_build(
        release=release_create(user=admin, kind=ReleaseKind.SCALE, oracle_run=run)
    )
    submission = Submission.objects.create(
        release=release,
        submitted_by=researcher,
        model_name="m",
        file_path="none.jsonl",
        sha256="0" * 64,
        prediction_count=0,
    )
    calibration = CalibrationSet.objects.create(
        name="cal", model_name="m", tau_at_draw=0.8, band=0.05, created_by=admin
    )
    calibration.campaigns.add(campaign)
    CalibrationPair.objects.create(
        calibration_set=calibration,
        position=1,
        task="acute_problems",
        text_a="Septic shock",
        text_b="Sepsis",
        cosine=0.8,
        stratum="random",
    )
    draw = CalibrationDraw.objects.create(
        name="Draw", per_stratum=2, band=0.15, created_by=admin
    )
    import_run = ImportRun.objects.create(source=Source.CLIF, started_by=admin)
    credential = datause_services.credential_record(
        actor=researcher,
        user=researcher,
        source=data_source_get(MIMIC_IV),
        physionet_username="researcher",
        agreement_version="PhysioNet Credentialed Health Data Use Agreement 1.5.0",
        signed_on=timezone.localdate(),
        expires_on=timezone.localdate() + timedelta(days=30),
    )
    attestation = datause_services.attestation_record(
        actor=researcher,
        address="https://agent.example.org/predict",
        source=data_source_get(MIMIC_IV),
        purpose="endpoint",
        service="A lab's server",
        zero_retention=True,
        no_training=True,
        no_human_review=True,
        evidence_url="https://lab.example.org/policy",
    )
    build_run = BuildRun.objects.create(kind=BuildKind.WINDOWS, started_by=admin)
    agent_run = AgentRun.objects.create(
        release=release, agent="local-window", created_by=admin
    )
    stay_state = AgentStayState.objects.create(run=agent_run, stay=stay)
    users = {
        "anonymous": None,
        "physician": owner,
        "researcher": researcher,
        "admin": admin,
    }
    tokens = {
        role: token_store(user=user).key
        for role, user in users.items()
        if user is not None
    }
    return {
        "users": users,
        "tokens": tokens,
        "co_rater": co_rater,
        "outsider": outsider,
        "ids": {
            "assignment_id": mine.pk,
            "campaign_id": campaign.pk,
            "window_id": gold[0].pk,
            "set_id": calibration.pk,
            "draw_id": draw.pk,
            "release_id": release.pk,
            "file_path": release.files.order_by("path").first().path,
            "submission_id": submission.pk,
            "name": "status",
            "run_id": run.pk,
            "job_id": job.pk,
            "backbone_id": run.backbone_id,
            "import_run_id": import_run.pk,
            "build_run_id": build_run.pk,
            "stay_state_id": stay_state.pk,
            "label_id": run.labels.order_by("pk").first().pk,
            "stay_id": stay.pk,
            "index": 0,
            "credential_id": credential.pk,
            "attestation_id": attestation.pk,
        },
        "others": {
            "assignment_id": theirs.pk,
            "window_id": outside.pk,
            "job_id": other_job.pk,
            "label_id": other_run.labels.get().pk,
            "file_path": "../../../../etc/passwd",
        },
    }


def client_for(world, role: str) -> Client:
    """``role``'s client, signed in and holding its API token: it raises what
    would have been a 500, so a failure shows its traceback; 4xx answers come
    back as responses."""
    client = Client(raise_request_exception=True)
    user = world["users"][role]
    if user is not None:
        client.force_login(user)
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {world['tokens'][role]}"
    return client


def url_of(route: Route, values: dict) -> str:
    kwargs = {p: values[p] for p in route.params}
    return reverse(route.name, kwargs=kwargs)


def call(client: Client, method: str, url: str, data=None):
    """The response, or the exception as a 500 stand-in with its traceback."""
    try:
        if method in ("get", "delete"):
            return getattr(client, method)(url), None
        if method == "put":
            return client.put(
                url, data="x=1", content_type="application/x-www-form-urlencoded"
            ), None
        return client.post(url, data or {}), None
    except Exception:  # the request would have been a 500
        return None, traceback.format_exc(limit=-6)


def refused(route: Route, role: str) -> bool:
    if role == "anonymous":
        return route.name not in {"home", "login", "logout", "api_schema", "api_docs"}
    if role == "admin":
        return False
    if route.name in ADMIN_ONLY:
        return True
    if role == "researcher" and route.name in NOT_FOR_RESEARCHERS:
        return True
    if role == "physician" and route.name in NOT_FOR_PHYSICIANS:
        return True
    return False


def test_every_url_pattern_is_walked():
    names = {r.name for r in site_routes()}
    assert {
        "annotation:annotate",
        "oracle:backbone_edit",
        "exports_api:release_file",
    } <= names
    assert ADMIN_ONLY <= names
    assert NOT_FOR_RESEARCHERS <= names
    assert NOT_FOR_PHYSICIANS <= names


@pytest.mark.parametrize("role", ROLES)
def test_no_url_answers_500_and_wrong_roles_get_no_2xx_and_write_nothing(world, role):
    client = client_for(world, role)
    problems = []
    counts = model_counts()  # carried from one request to the next
    for route in site_routes():
        if route.name == "logout":
            continue  # signs the client out: checked by its own view's tests
        url = url_of(route, world["ids"])
        for method in METHODS:
            user = world["users"][role]
            if user is not None:
                # The token pages (revoke, create) replace the user's key,
                # which is shown once: a new one is made for the next call.
                key = world["tokens"][role]
                if not ApiToken.objects.filter(user=user, prefix=key[:8]).exists():
                    key = world["tokens"][role] = token_store(user=user).key
                client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
            before = counts
            response, error = call(client, method, url)
            if error:
                problems.append(f"{role} {method.upper()} {url}: exception\n{error}")
                counts = model_counts()
                continue
            status = response.status_code
            counts = model_counts()
            if status >= 500:
                problems.append(f"{role} {method.upper()} {url}: {status}")
            if refused(route, role):
                if 200 <= status < 300:
                    problems.append(
                        f"{role} {method.upper()} {url}: {status} (refused role)"
                    )
                if role == "anonymous" and route.name.startswith("exports_api:"):
                    if status not in (401, 403):
                        problems.append(
                            f"{role} {method.upper()} {url}: {status} not 401"
                        )
                elif role == "anonymous" and method == "get" and status == 302:
                    if "/accounts/login/" not in response["Location"]:
                        problems.append(f"{role} GET {url}: redirect not to login")
                elif route.name.startswith("exports_api:") and method == "get":
                    if status not in (403, 404):
                        problems.append(f"{role} GET {url}: {status} not 403")
                elif (
                    route.name in ADMIN_ONLY
                    and method == "get"
                    and status
                    not in (
                        403,
                        405,  # a POST-only endpoint: the method is refused first
                    )
                ):
                    problems.append(f"{role} GET {url}: {status}, not 403")
                if counts != before:
                    problems.append(f"{role} {method.upper()} {url}: wrote rows")
    assert not problems, "\n".join(problems)


BAD_IDS = ("2147483648", "9223372036854775808", "99999999999999999999999")


@pytest.mark.parametrize("role", ("physician", "admin"))
def test_zero_huge_negative_and_text_ids_are_4xx_and_write_nothing(world, role):
    client = client_for(world, role)
    problems = []
    counts = model_counts()  # carried from one request to the next
    for route in site_routes():
        int_params = [p for p in route.params if p not in ("file_path", "name")]
        for param in int_params:
            sentinel = 987654321
            url = url_of(route, {**world["ids"], param: sentinel})
            zero = () if param == "index" else ("0",)  # window 0 exists
            for bad in zero + BAD_IDS + ("-1", "abc", "1.5", "%00"):
                forged = url.replace(str(sentinel), bad, 1)
                for method in ("get", "post"):
                    before = counts
                    response, error = call(client, method, forged)
                    if error:
                        problems.append(f"{role} {method} {forged}: exception\n{error}")
                        counts = model_counts()
                        continue
                    if (
                        not 400 <= response.status_code < 500
                        and response.status_code != 405
                    ):
                        problems.append(
                            f"{role} {method} {forged}: {response.status_code}"
                        )
                    counts = model_counts()
                    if counts != before:
                        problems.append(f"{role} {method} {forged}: wrote rows")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ("physician", "admin"))
def test_ids_of_other_peoples_objects_and_other_parents_are_refused(world, role):
    """Another physician's assignment, a window outside the campaign, a
    validation job of another run, a path outside the release: 4xx, nothing
    written."""
    client = client_for(world, role)
    problems = []
    counts = model_counts()  # carried from one request to the next
    for route in site_routes():
        # An admin may act on any assignment of a campaign: for an admin only
        # the other parents (window, run, release) are forged.
        swapped = [
            p
            for p in route.params
            if p in world["others"] and not (role == "admin" and p == "assignment_id")
        ]
        for param in swapped:
            url = url_of(route, {**world["ids"], param: world["others"][param]})
            for method in ("get", "post"):
                before = counts
                response, error = call(
                    client,
                    method,
                    url,
                    {"payload": '{"status": "stable"}', "base_version": "1"},
                )
                if error:
                    problems.append(f"{role} {method} {url}: exception\n{error}")
                    counts = model_counts()
                    continue
                if not 400 <= response.status_code < 500:
                    problems.append(f"{role} {method} {url}: {response.status_code}")
                counts = model_counts()
                if counts != before:
                    problems.append(f"{role} {method} {url}: wrote rows")
                assert b"Secret item" not in response.content, url
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "form",
    [
        {"payload": "{not json"},
        {"payload": "[]", "base_version": "0"},
        {"payload": '{"status": 5}', "base_version": "x"},
        {"payload": '{"status": "stable"}', "base_version": "99999999999999999999"},
        {"payload": '{"status": "stable"}', "base_version": "-1"},
        {"payload": '{"acute_problems": "text"}', "base_version": "0"},
        {
            "payload": '{"acute_problems": [{"text": 3, "evidence": "x"}]}',
            "base_version": "0",
        },
    ],
)
@pytest.mark.parametrize("endpoint", ("annotation:draft", "annotation:submit"))
def test_malformed_label_forms_get_a_clear_4xx_and_change_nothing(
    world, form, endpoint
):
    client = client_for(world, "physician")
    url = reverse(endpoint, args=[world["ids"]["assignment_id"]])
    before = model_counts()
    response, error = call(client, "post", url, form)
    assert error is None, error
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["message"]
    assert model_counts() == before


@pytest.mark.parametrize("seconds", ["NaN", "1e400", "-5", "99999999999999999999"])
def test_a_forged_time_on_task_is_bounded_and_unknown_payload_keys_are_dropped(
    world, seconds
):
    """The seconds of work are the page's own counter: a forged value never
    blocks the save (the physician's work is kept) but counts as nothing."""
    client = client_for(world, "physician")
    url = reverse("annotation:draft", args=[world["ids"]["assignment_id"]])
    response = client.post(
        url,
        {
            "payload": '{"status": "stable", "injected": {"oracle": 1}}',
            "base_version": "0",
            "active_seconds": seconds,
        },
    )
    assert response.status_code == 200
    label = Label.objects.get(assignment_id=world["ids"]["assignment_id"])
    assert "injected" not in label.payload
    assert 0 <= label.time_on_task_seconds <= MAX_ACTIVE_SECONDS_PER_SAVE


def test_suggestions_never_carry_a_co_raters_items_on_a_window_one_rates(world):
    """Asked from the page of window 0, the suggestions once gave the
    co-rater's submitted items on window 1, which the physician rates too:
    hidden now while any window they share is open."""
    from django.utils import timezone

    from annotation.models import CampaignWindow
    from annotation.services import label_submit

    co_rater = world["co_rater"]
    campaign_id = world["ids"]["campaign_id"]
    from annotation.models import Assignment

    theirs = Assignment.objects.get(
        campaign_id=campaign_id, annotator=co_rater, window__index=1
    )
    label_submit(
        annotator=co_rater,
        assignment_id=theirs.pk,
        payload={
            "status": "stable",
            "acute_problems": [{"text": "Shared secret", "evidence": []}],
        },
        base_version=0,
    )
    client = client_for(world, "physician")
    url = reverse("annotation:suggest", args=[world["ids"]["assignment_id"]])
    query = {"field": "acute_problems", "q": "shared"}
    assert b"Shared secret" not in client.get(url, query).content
    CampaignWindow.objects.filter(campaign_id=campaign_id, window=theirs.window).update(
        adjudicated_at=timezone.now()
    )
    # Still hidden: they share window 0, still open, where the co-rater could
    # have written the same words (annotation.blindness; the canary crawl in
    # tests/annotation/test_blindness_canary.py shows them after closing).
    assert b"Shared secret" not in client.get(url, query).content


def test_physicians_never_see_a_co_raters_or_the_oracles_labels(world):
    """Before adjudication the physician's pages, the suggestions (for the
    window being labelled) and the window pages show neither the co-rater's
    draft nor the Oracle's items."""
    client = client_for(world, "physician")
    ids = world["ids"]
    urls = [
        reverse("annotation:queue"),
        reverse("annotation:annotate", args=[ids["assignment_id"]]),
        reverse("annotation:suggest", args=[ids["assignment_id"]])
        + "?field=acute_problems&q=secr",
        reverse("annotation:suggest", args=[ids["assignment_id"]])
        + "?field=acute_problems&q=oracle",
        reverse("windows:stay_detail", args=[ids["stay_id"]]),
        reverse("windows:window_detail", args=[ids["stay_id"], 0]),
        reverse("windows:stay_tracks_json", args=[ids["stay_id"]]),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"Secret item" not in response.content, url
        assert b"OracleOnly" not in response.content, url


# Forms ------------------------------------------------------------------------

BACKBONE_OK = {
    "name": "gpt",
    "kind": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "m",
    "api_key_env": "OPENAI_API_KEY",
    "parameters": '{"temperature": 0}',
    "timeout_seconds": "60",
    "max_retries": "2",
    "concurrency": "4",
    "requests_per_minute": "60",
    "price_per_million_input": "0",
    "price_per_million_output": "0",
}


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"base_url": "not a url"}, "base_url"),
        ({"base_url": "file:///etc/passwd"}, "base_url"),
        ({"base_url": "ftp://example.org/v1"}, "base_url"),
        ({"base_url": "javascript:alert(1)"}, "base_url"),
        ({"parameters": "[1, 2]"}, "parameters"),
        ({"parameters": '"temperature"'}, "parameters"),
        ({"parameters": "{bad"}, "parameters"),
        (
            {"parameters": '{"messages": [{"role": "system", "content": "x"}]}'},
            "parameters",
        ),
        ({"parameters": '{"model": "other"}'}, "parameters"),
        ({"parameters": '{"stream": true}'}, "parameters"),
        ({"api_key_env": "sk-live-0123456789abcdef"}, "api_key_env"),
        ({"api_key_env": "OPENAI KEY"}, "api_key_env"),
        ({"api_key_env": "1KEY"}, "api_key_env"),
        ({"concurrency": "-1"}, "concurrency"),
        ({"concurrency": "0"}, "concurrency"),
        ({"concurrency": "99999999999"}, "concurrency"),
        ({"requests_per_minute": "-5"}, "requests_per_minute"),
        ({"requests_per_minute": "99999999999999"}, "requests_per_minute"),
        ({"max_retries": "-1"}, "max_retries"),
        ({"timeout_seconds": "-1"}, "timeout_seconds"),
        ({"timeout_seconds": "nan"}, "timeout_seconds"),
        ({"timeout_seconds": "inf"}, "timeout_seconds"),
        ({"price_per_million_input": "-0.5"}, "price_per_million_input"),
        ({"kind": "shell"}, "kind"),
    ],
)
def test_a_bad_backbone_is_refused_with_a_message_by_its_field(world, changes, field):
    client = client_for(world, "admin")
    before = model_counts()
    response = client.post(reverse("oracle:backbone_new"), {**BACKBONE_OK, **changes})
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors.get(field), form.errors
    assert model_counts() == before
    edit = client.post(
        reverse("oracle:backbone_edit", args=[world["ids"]["backbone_id"]]),
        {**BACKBONE_OK, **changes},
    )
    assert edit.status_code == 200
    assert edit.context["form"].errors
    assert model_counts() == before


def test_a_good_backbone_is_saved(world):
    client = client_for(world, "admin")
    response = client.post(reverse("oracle:backbone_new"), BACKBONE_OK)
    assert response.status_code == 302


@pytest.mark.parametrize(
    "form",
    [
        {"name": "c", "annotators_per_window": "abc"},
        {"name": "c", "annotators_per_window": "-1"},
        {"name": "c", "annotators_per_window": "99999999999999999999"},
        {"name": "c", "annotators_per_window": "2", "physicians": ["abc"]},
        {
            "name": "c",
            "annotators_per_window": "2",
            "physicians": ["99999999999999999999"],
        },
        {"name": "c", "annotators_per_window": "2", "cohort": "-3"},
        {"name": "c", "annotators_per_window": "2", "cohort": "99999999999999999999"},
        {"name": "", "annotators_per_window": "1"},
        {"name": "x" * 500, "annotators_per_window": "1"},
    ],
)
def test_a_bad_campaign_form_is_refused_with_a_message(world, form):
    client = client_for(world, "admin")
    before = model_counts()
    response = client.post(reverse("annotation:campaign_new"), form)
    assert response.status_code == 200
    assert response.context["form"].errors
    assert model_counts() == before


@pytest.mark.parametrize(
    "route, form",
    [
        (
            "annotation:campaign_new",
            {"name": "nul\x00byte", "annotators_per_window": "1"},
        ),
        ("annotation:calibration_draw", {"name": "s\x00", "per_stratum": "5"}),
        ("windows:import_start", {"source": "mimic\x00", "path": "/x"}),
        ("exports:release_build_start", {"kind": "gold", "notes": "\x00"}),
    ],
)
def test_a_nul_byte_in_any_form_field_is_a_400_and_writes_nothing(world, route, form):
    """PostgreSQL refuses NUL in text: refused before any view runs
    (realicu_web.middleware.RequestHygieneMiddleware), on every form."""
    client = client_for(world, "admin")
    before = model_counts()
    response, error = call(client, "post", reverse(route), form)
    assert error is None, error
    assert response.status_code == 400
    assert b"NUL character" in response.content
    assert model_counts() == before


def test_a_campaign_cannot_take_a_researcher_as_physician(world):
    client = client_for(world, "admin")
    before = model_counts()
    researcher = world["users"]["researcher"]
    response = client.post(
        reverse("annotation:campaign_new"),
        {"name": "c", "annotators_per_window": "1", "physicians": [researcher.pk]},
    )
    assert response.status_code == 200
    assert response.context["form"].errors
    assert model_counts() == before


@pytest.mark.parametrize(
    "form",
    [
        {"name": "s", "per_stratum": "abc", "band": "0.05"},
        {"name": "s", "per_stratum": "-1", "band": "0.05"},
        {"name": "s", "per_stratum": "10", "band": "nan"},
        {"name": "s", "per_stratum": "10", "band": "inf"},
        {"name": "s", "per_stratum": "10", "band": "-1"},
        {"name": "s", "per_stratum": "99999999999999999999", "band": "0.05"},
        {"name": "", "per_stratum": "10", "band": "0.05"},
        {"name": "s", "per_stratum": "10", "band": "0.05", "campaigns": ["abc"]},
        {
            "name": "s",
            "per_stratum": "10",
            "band": "0.05",
            "seed": "99999999999999999999",
        },
    ],
)
def test_a_bad_calibration_draw_is_refused_with_a_message(world, form):
    client = client_for(world, "admin")
    data = {"campaigns": [world["ids"]["campaign_id"]], **form}
    before = model_counts()
    response, error = call(client, "post", reverse("annotation:calibration_draw"), data)
    assert error is None, error
    assert response.status_code == 302
    assert model_counts() == before


@pytest.mark.parametrize(
    "form",
    [
        {"pair": "abc", "judgment": "same"},
        {"pair": "99999999999999999999", "judgment": "same"},
        {"pair": "-1", "judgment": "different"},
        {"judgment": "same"},
        {"pair": "PAIR", "judgment": "maybe"},
    ],
)
def test_a_bad_calibration_judgment_is_refused(world, form):
    client = client_for(world, "admin")
    pair = CalibrationPair.objects.get()
    data = {k: (str(pair.pk) if v == "PAIR" else v) for k, v in form.items()}
    before = model_counts()
    response, error = call(
        client,
        "post",
        reverse("annotation:calibration_judge_post", args=[world["ids"]["set_id"]]),
        data,
    )
    assert error is None, error
    assert response.status_code in (200, 302)
    assert model_counts() == before


@pytest.mark.parametrize("tau", ["", "abc", "nan", "inf", "-1", "2", "1e400"])
def test_a_bad_tau_is_not_adopted(world, tau):
    client = client_for(world, "admin")
    before = model_counts()
    response, error = call(
        client,
        "post",
        reverse("annotation:calibration_adopt", args=[world["ids"]["set_id"]]),
        {"tau": tau, "reason": "r"},
    )
    assert error is None, error
    assert response.status_code == 302
    assert model_counts() == before


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\x01\x02\xff\xfe" * 100,
        b"\xef\xbb\xbf{not json}\n",
        b"[1,2,3]\n",
        b"{}\n",
    ],
)
def test_a_bad_prediction_file_is_refused_with_a_message(world, content):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_for(world, "researcher")
    before = model_counts()
    response = client.post(
        reverse("exports:submission_upload", args=[world["ids"]["release_id"]]),
        {
            "file": SimpleUploadedFile("p.jsonl", content),
            "model_name": "m",
            "k": "5",
        },
    )
    assert response.status_code == 400
    assert model_counts() == before


def test_a_prediction_file_over_the_limit_is_refused(world, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.REALICU_SUBMISSION_MAX_BYTES = 1000
    client = client_for(world, "researcher")
    before = model_counts()
    response = client.post(
        reverse("exports:submission_upload", args=[world["ids"]["release_id"]]),
        {
            "file": SimpleUploadedFile("p.jsonl", b'{"a": 1}\n' * 500),
            "model_name": "m",
            "k": "5",
        },
    )
    assert response.status_code == 400
    assert b"REALICU_SUBMISSION_MAX_BYTES" in response.content
    assert model_counts() == before


@pytest.mark.parametrize(
    "path",
    [
        "/etc",
        "ROOT/../..",
        "ROOT/../outside",
        "ROOT/\x00x",
        "relative/dir",
        "ROOT/missing",
    ],
)
def test_an_import_outside_the_import_roots_is_refused(world, settings, tmp_path, path):
    root = tmp_path / "imports"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    settings.REALICU_IMPORT_ROOTS = [str(root)]
    client = client_for(world, "admin")
    before = model_counts()
    response, error = call(
        client,
        "post",
        reverse("windows:import_start"),
        {"source": "mimic", "path": path.replace("ROOT", str(root))},
    )
    assert error is None, error
    assert response.status_code == 400
    if "\x00" in path:  # refused before the view (RequestHygieneMiddleware)
        assert b"NUL character" in response.content
    else:
        assert response.context["form"].errors
    assert model_counts() == before
