"""The world and the tools of the forged-request tests (test_forged_requests,
test_forged_forms, test_fuzz_inputs, the blindness canary): every named URL of
the site walked from the resolver, every model's row count in one query, users
of each role with objects of each kind and the ids of others' objects, a client
signed in as a role, and a call that returns a would-be 500 as its traceback.
Fixtures: a module takes ``world`` and ``_isolated`` with ``from tests.forged
import ...``."""

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
from annotation.models import CalibrationDraw, CalibrationPair, CalibrationSet
from annotation.services import campaign_create, label_save_draft
from datause import services as datause_services
from exports.building import release_build
from exports.models import ReleaseKind, Submission
from exports.services import release_create
from exports.tokens import token_store
from oracle.models import ValidationJob
from tests.annotation.conftest import make_gold_windows, make_role_user
from tests.exports.helpers import make_oracle_run, oracle_payload
from tests.factories import make_admission, make_stay
from windows.datasources import MIMIC_IV, data_source_get
from windows.models import BuildKind, BuildRun, ImportRun, Source
from windows.windowing import windows_build

ROLES = ("anonymous", "physician", "researcher", "admin")

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
