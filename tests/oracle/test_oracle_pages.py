"""The admin's Oracle pages: every page renders for an admin and is a 404 for a
physician (Oracle labels are never shown to physicians); a run started from
the form, its live progress fragment, refused input, and the backbone form that
takes a key's variable name and never a key."""

import pytest
from django.urls import resolve, reverse

from accounts.roles import Role
from annotation.services import campaign_create
from oracle import selectors, services
from oracle.models import Backbone, OracleRun, ValidationJob, ValidationReport
from tests.annotation.conftest import make_role_user
from tests.oracle.helpers import llm_run, make_cohort_with_stay, rules_run
from windows.models import Window

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(admin_user):
    cohort, _, windows = make_cohort_with_stay()
    run = rules_run(admin_user, name="page run", cohort=cohort)
    services.oracle_run_execute_inline(run_id=run.pk)
    Window.objects.filter(pk__in=[w.pk for w in windows[:2]]).update(sampled_gold=True)
    campaign = campaign_create(
        admin=admin_user,
        name="pages gold",
        windows=windows[:2],
        physicians=[make_role_user(Role.PHYSICIAN) for _ in range(2)],
    )
    ValidationJob.objects.create(run=run, campaign=campaign, created_by=admin_user)
    return run


def oracle_urls(run):
    rid = run.pk
    backbone = run.backbone_id
    job = run.validation_jobs.get().pk
    label = run.labels.order_by("pk").first().pk
    return [
        ("get", reverse("oracle:run_labels", args=[rid])),
        ("get", reverse("oracle:run_label", args=[rid, label])),
        ("get", reverse("oracle:validation_progress", args=[rid, job])),
        ("get", reverse("oracle:run_validation", args=[rid]) + f"?job={job}"),
        ("get", reverse("oracle:run_list")),
        ("get", reverse("oracle:run_new")),
        ("get", reverse("oracle:gold_draw")),
        ("get", reverse("oracle:run_detail", args=[rid])),
        ("get", reverse("oracle:run_progress", args=[rid])),
        ("get", reverse("oracle:run_validation", args=[rid])),
        ("get", reverse("oracle:backbone_list")),
        ("get", reverse("oracle:backbone_new")),
        ("get", reverse("oracle:backbone_edit", args=[backbone])),
        ("post", reverse("oracle:run_cancel", args=[rid])),
        ("post", reverse("oracle:run_resume", args=[rid])),
        ("post", reverse("oracle:run_retry_failed", args=[rid])),
        ("post", reverse("oracle:run_validate", args=[rid])),
    ]


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_physicians_and_researchers_get_403_on_every_oracle_url(client, run, role):
    """Every URL of oracle/urls.py is tried (checked against its patterns, so a
    new page cannot be left out)."""
    urls = oracle_urls(run)
    assert {name for name in _url_names()} <= {
        resolve(url.split("?")[0]).url_name for _, url in urls
    }
    client.force_login(make_role_user(role))
    for method, url in urls:
        assert getattr(client, method)(url).status_code == 403, url
    # Nor through the Django admin, which is for staff (admins) only.
    for model in ("oraclelabel", "oraclerun", "validationreport", "validationjob"):
        response = client.get(f"/admin/oracle/{model}/")
        assert response.status_code == 302 and "/admin/login/" in response.url
    run.refresh_from_db()
    assert run.state == "completed" and run.cancel_requested_at is None
    assert run.labels.count() == run.total_windows
    assert run.validation_jobs.get().state == "queued"
    assert not ValidationReport.objects.exists()


def _url_names():
    from oracle.urls import urlpatterns

    return [pattern.name for pattern in urlpatterns]


def test_signed_out_visitors_are_sent_to_sign_in(client, run):
    for method, url in oracle_urls(run):
        response = getattr(client, method)(url)
        assert response.status_code == 302 and "/accounts/login/" in response.url, url


def test_admin_pages_render(client, admin_user, run):
    client.force_login(admin_user)
    for method, url in oracle_urls(run):
        if method == "get":
            response = client.get(url)
            assert response.status_code == 200, url
    page = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    assert 'data-percent="100"' in page and "no LLM" in page
    assert "Oracle" in client.get(reverse("oracle:run_list")).content.decode()
    validation = client.get(
        reverse("oracle:run_validation", args=[run.pk])
    ).content.decode()
    assert "data-no-report" in validation  # no promote button without a report
    for query in ("report", "job"):
        for value in ("9" * 5000, "abc", "-1"):
            response = client.get(
                reverse("oracle:run_validation", args=[run.pk]), {query: value}
            )
            assert response.status_code == 404, (query, value[:10])
    assert 'id="validation-job"' in validation  # the queued validation's bar


def test_progress_fragment_polls_while_the_run_is_going(client, admin_user):
    cohort, _, _ = make_cohort_with_stay()
    run = rules_run(admin_user, name="going", cohort=cohort)
    client.force_login(admin_user)
    fragment = client.get(
        reverse("oracle:run_progress", args=[run.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'hx-trigger="every 1500ms"' in fragment and "<html" not in fragment
    assert 'data-percent="0"' in fragment and "data-cancel" in fragment


def test_the_run_page_tells_a_live_run_from_one_whose_workers_died(
    client, admin_user, settings, django_capture_on_commit_callbacks
):
    """Issue 23: while a chunk heart-beats, the page shows the worker and no
    Resume; once every chunk went silent past the bound, loading the page
    queues the run's lanes again (the reaper's check) and offers Resume."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import OutboxMessage

    settings.REALICU_JOB_STALE_SECONDS = 60
    cohort, _, _ = make_cohort_with_stay()
    run = rules_run(admin_user, name="liveness", cohort=cohort)
    OracleRun.objects.filter(pk=run.pk).update(
        state="running", heartbeat_at=timezone.now(), worker="node-1:42"
    )
    client.force_login(admin_user)
    url = reverse("oracle:run_progress", args=[run.pk])
    page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "last heard" in page and "node-1:42" in page
    assert "data-resume" not in page and "data-cancel" in page
    assert not OutboxMessage.objects.exists()

    OracleRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=120)
    )
    with django_capture_on_commit_callbacks(execute=False):
        page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    run.refresh_from_db()
    assert run.state == "queued" and run.attempts == 1
    assert "re-queued" in run.progress_label
    lanes = services.run_lanes(run)
    assert (
        OutboxMessage.objects.filter(task=services.CHUNK_TASK, args=[run.pk]).count()
        == lanes
    )
    # Queued again, it waits for a worker: nothing to resume, still cancellable.
    assert "data-resume" not in page and "last heard" not in page
    assert "data-cancel" in page


def test_new_run_form_starts_a_run_and_refuses_bad_input(client, admin_user):
    cohort, _, windows = make_cohort_with_stay()
    rules = selectors.backbone_rules_default()
    client.force_login(admin_user)
    url = reverse("oracle:run_new")
    response = client.post(url, {"name": "x", "backbone": rules.pk})
    assert response.status_code == 200
    assert "Choose either a campaign" in response.content.decode()
    assert OracleRun.objects.count() == 0
    response = client.post(
        url, {"name": "from form", "backbone": rules.pk, "cohort": cohort.pk}
    )
    run = OracleRun.objects.get()
    assert response.status_code == 302 and response.url.endswith(f"/runs/{run.pk}/")
    assert run.total_windows == len(windows) and run.state == "queued"


def test_backbone_form_takes_a_variable_name_never_a_key(client, admin_user):
    client.force_login(admin_user)
    url = reverse("oracle:backbone_new")
    data = {
        "name": "local vllm",
        "kind": "openai",
        "base_url": "http://127.0.0.1:8001/v1",
        "model": "qwen",
        "api_key_env": "sk-abc123",
        "parameters": '{"temperature": 0}',
        "timeout_seconds": 60,
        "max_retries": 3,
        "concurrency": 8,
        "requests_per_minute": 300,
        "price_per_million_input": 0,
        "price_per_million_output": 0,
    }
    response = client.post(url, data)
    assert "not the key itself" in response.content.decode()
    assert not Backbone.objects.filter(name="local vllm").exists()
    response = client.post(url, {**data, "parameters": "[1]"})
    assert "JSON object" in response.content.decode()
    for deep in ('{"a": ' * 5000 + "1" + "}" * 5000, '{"seed": ' + "9" * 5000 + "}"):
        response = client.post(
            url, {**data, "api_key_env": "REALICU_LLM_VLLM_KEY", "parameters": deep}
        )
        assert response.status_code == 200 and "Refused:" in response.content.decode()
    assert not Backbone.objects.filter(name="local vllm").exists()
    response = client.post(url, {**data, "api_key_env": "REALICU_LLM_VLLM_KEY"})
    assert response.status_code == 302
    backbone = Backbone.objects.get(name="local vllm")
    assert backbone.api_key_env == "REALICU_LLM_VLLM_KEY" and backbone.parameters == {
        "temperature": 0
    }


def test_the_run_page_shows_prompt_tokens_against_the_context_window(
    client, admin_user, fake_llm
):
    run, windows = llm_run(admin_user, fake_llm)
    client.force_login(admin_user)
    page = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    # The fake server reports 1,000 prompt tokens for every request.
    assert f"Median 1000 · p95 1000 · max 1000 of {len(windows)} windows" in page
    assert "against a context window of 4096 tokens (512 for the reply)" in page


def _run_in_state(admin_user, state: str, *, heartbeat_age: float | None = None):
    """A rules run over a small cohort left with no label, in ``state``, with a
    heartbeat ``heartbeat_age`` seconds old (None: none)."""
    from datetime import timedelta

    from django.utils import timezone

    cohort, _, _ = make_cohort_with_stay(hours=2.0)
    run = rules_run(admin_user, name=f"{state} run", cohort=cohort)
    heartbeat = (
        None
        if heartbeat_age is None
        else timezone.now() - timedelta(seconds=heartbeat_age)
    )
    OracleRun.objects.filter(pk=run.pk).update(state=state, heartbeat_at=heartbeat)
    run.refresh_from_db()
    return run


@pytest.mark.parametrize(
    ("state", "heartbeat_age", "cancel", "resume"),
    [
        ("queued", None, True, False),
        ("running", 1, True, False),
        ("cancelled", None, False, True),
        ("failed", None, False, True),
        ("completed", None, False, False),
    ],
)
def test_the_run_page_offers_cancel_while_going_and_resume_only_when_resumable(
    client, admin_user, settings, state, heartbeat_age, cancel, resume
):
    settings.REALICU_JOB_STALE_SECONDS = 60
    run = _run_in_state(admin_user, state, heartbeat_age=heartbeat_age)
    client.force_login(admin_user)
    page = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    assert ("data-cancel" in page) is cancel
    assert ("data-resume" in page) is resume


def test_a_stalled_run_is_resumable_and_a_live_one_is_not(admin_user, settings):
    """The jobs/ lease state decides: a running run whose heartbeat is older
    than the bound lost its workers."""
    settings.REALICU_JOB_STALE_SECONDS = 60
    live = _run_in_state(admin_user, "running", heartbeat_age=5)
    stalled = _run_in_state(admin_user, "running", heartbeat_age=600)
    assert "running" in selectors.run_not_resumable_reason(run=live)
    assert selectors.run_not_resumable_reason(run=stalled) is None
    progress = selectors.oracle_run_progress(admin=admin_user, run=stalled)
    assert progress["stalled"] and progress["resumable"] and progress["cancellable"]


@pytest.mark.parametrize(
    ("state", "message"),
    [("running", "The run is running"), ("queued", "The run is queued")],
)
def test_resume_posted_while_the_run_is_going_changes_nothing_and_says_why(
    client, admin_user, settings, state, message
):
    from jobs.models import OutboxMessage

    settings.REALICU_JOB_STALE_SECONDS = 60
    run = _run_in_state(admin_user, state, heartbeat_age=1)
    client.force_login(admin_user)
    response = client.post(reverse("oracle:run_resume", args=[run.pk]), follow=True)
    assert message in response.content.decode()
    fresh = OracleRun.objects.get(pk=run.pk)
    assert fresh.state == state and fresh.heartbeat_at == run.heartbeat_at
    assert not OutboxMessage.objects.exists()


def test_resume_of_a_cancelled_run_queues_it_again(
    client, admin_user, django_capture_on_commit_callbacks
):
    run = _run_in_state(admin_user, "cancelled")
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("oracle:run_resume", args=[run.pk]), follow=True)
    assert "Run resumed" in response.content.decode()
    assert OracleRun.objects.get(pk=run.pk).state == "queued"
