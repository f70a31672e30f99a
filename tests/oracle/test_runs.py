"""Oracle runs through the services: creation and its refusals, chunked execution
with the rules backbone over a small stay, no duplicate on a rerun, resume that
labels only what is missing, cancellation, failures kept with their reason and
never as labels, and admin-only access."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from accounts.roles import Role
from oracle import selectors, services
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleLabel,
    OracleLabelState,
    OracleRun,
    OracleWindowClaim,
    RunState,
)
from oracle.services import ChunkOutcome
from tests.annotation.conftest import make_role_user
from tests.oracle.helpers import fake_backbone
from windows.models import Cohort

pytestmark = pytest.mark.django_db


@pytest.fixture
def physician(db):
    return make_role_user(Role.PHYSICIAN)


@pytest.fixture
def rules():
    return selectors.backbone_rules_default()


def new_run(admin, cohort, backbone, **kw):
    return services.oracle_run_create(
        admin=admin, name="rules run", backbone=backbone, cohort=cohort, **kw
    )


def labels_per_window(run):
    return sorted(
        OracleLabel.objects.filter(run=run).values_list("window_id", flat=True)
    )


def test_rules_backbone_exists_by_default_and_is_named_as_rules(db):
    backbone = selectors.backbone_rules_default()
    assert backbone.kind == BackboneKind.RULES
    assert "rules" in str(backbone).lower() and "no llm" in str(backbone).lower()
    assert selectors.backbone_rules_default() == backbone


def test_migrate_leaves_the_rules_backbone_and_the_default_prompt(db):
    """`make run`'s bootstrap migrates; after it the Oracle can run with no LLM
    and no admin setup."""
    from django.core.management import call_command

    from oracle.models import PromptTemplate
    from oracle.prompts import DEFAULT_VERSION

    Backbone.objects.filter(runs__isnull=True).delete()
    PromptTemplate.objects.filter(runs__isnull=True).delete()
    call_command("migrate", verbosity=0)
    assert Backbone.objects.filter(kind=BackboneKind.RULES).count() == 1
    assert PromptTemplate.objects.filter(version=DEFAULT_VERSION).count() == 1
    call_command("migrate", verbosity=0)  # once only
    assert Backbone.objects.filter(kind=BackboneKind.RULES).count() == 1


def test_run_create_snapshots_backbone_and_counts_cohort_windows(
    admin_user, cohort_data, rules
):
    cohort, stay, windows = cohort_data
    run = new_run(admin_user, cohort, rules)
    assert run.state == RunState.QUEUED
    assert run.total_windows == len(windows) == stay.windows.count() > 1
    assert run.backbone_snapshot["kind"] == "rules"
    assert run.backbone_snapshot["model"] == "rules-v1"
    assert "api_key" not in str(run.backbone_snapshot)
    assert run.prompt.version  # the default prompt, made at first use


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"cohort": None}, "Choose either a campaign"),
        ({"name": "  "}, "Give the run a name"),
        ({"name": "x" * 201}, "At most 200"),
    ],
)
def test_run_create_refuses_bad_input_and_writes_nothing(
    admin_user, cohort_data, rules, kwargs, message
):
    cohort, _, _ = cohort_data
    args = {"admin": admin_user, "name": "run", "backbone": rules, "cohort": cohort}
    args.update(kwargs)
    with pytest.raises(ValidationError) as error:
        services.oracle_run_create(**args)
    assert message in " ".join(error.value.messages)
    assert OracleRun.objects.count() == 0


def test_run_create_refuses_a_cohort_without_windows(admin_user, rules, db):
    empty = Cohort.objects.create(name="empty", seed=0, target_size=1)
    with pytest.raises(ValidationError, match="no windows to label"):
        services.oracle_run_create(
            admin=admin_user, name="r", backbone=rules, cohort=empty
        )
    assert OracleRun.objects.count() == 0


def test_run_create_refuses_an_unconfigured_llm_backbone(
    admin_user, cohort_data, rules
):
    cohort, _, _ = cohort_data
    rules.kind = BackboneKind.OPENAI  # no base URL nor model
    with pytest.raises(ValidationError, match="not fully configured"):
        new_run(admin_user, cohort, rules)
    assert OracleRun.objects.count() == 0


def test_chunks_label_every_window_once_with_provenance(admin_user, cohort_data, rules):
    cohort, stay, windows = cohort_data
    run = new_run(admin_user, cohort, rules)
    first = services.oracle_run_execute_chunk(run_id=run.pk, chunk_size=2)
    assert first.outcome == ChunkOutcome.LABELLED and first.claimed == 2
    assert OracleLabel.objects.filter(run=run).count() == 2
    assert not OracleWindowClaim.objects.exists()  # released after the chunk
    outcome = services.oracle_run_execute_inline(run_id=run.pk, chunk_size=2)
    assert outcome == ChunkOutcome.DONE
    run.refresh_from_db()
    assert run.state == RunState.COMPLETED and run.finished_at and run.started_at
    assert labels_per_window(run) == sorted(w.pk for w in windows)
    label = OracleLabel.objects.filter(run=run).first()
    assert label.state == OracleLabelState.OK
    assert label.backbone_kind == "rules" and label.model == "rules-v1"
    assert label.prompt_version == run.prompt.version
    assert label.status in ("improving", "stable", "deteriorating")
    assert set(label.payload) >= {"acute_problems", "action_ratings", "red_flags"}
    progress = selectors.oracle_run_progress(admin=admin_user, run=run)
    assert progress["done"] == progress["total"] == len(windows)
    assert progress["percent"] == 100 and progress["failed"] == 0


def test_a_rerun_never_duplicates_a_label(admin_user, cohort_data, rules):
    cohort, _, windows = cohort_data
    run = new_run(admin_user, cohort, rules)
    services.oracle_run_execute_inline(run_id=run.pk)
    before = sorted(OracleLabel.objects.filter(run=run).values_list("pk", flat=True))
    # A redelivered chunk task finds the run complete.
    assert (
        services.oracle_run_execute_chunk(run_id=run.pk).outcome == ChunkOutcome.STOPPED
    )
    # Even with the run forced back to running, nothing is left to claim.
    OracleRun.objects.filter(pk=run.pk).update(state=RunState.RUNNING)
    assert services.oracle_run_execute_chunk(run_id=run.pk).outcome == ChunkOutcome.DONE
    assert (
        sorted(OracleLabel.objects.filter(run=run).values_list("pk", flat=True))
        == before
    )
    with pytest.raises(ValidationError, match="Every window of this run is labelled"):
        services.oracle_run_resume(admin=admin_user, run=run)


def test_resume_labels_only_the_missing_windows(admin_user, cohort_data, rules):
    cohort, _, windows = cohort_data
    run = new_run(admin_user, cohort, rules)
    services.oracle_run_execute_chunk(run_id=run.pk, chunk_size=3)
    kept = dict(OracleLabel.objects.filter(run=run).values_list("window_id", "pk"))
    services.oracle_run_cancel(admin=admin_user, run=run)
    assert (
        services.oracle_run_execute_chunk(run_id=run.pk).outcome == ChunkOutcome.STOPPED
    )
    assert OracleLabel.objects.filter(run=run).count() == 3
    services.oracle_run_resume(admin=admin_user, run=run, enqueue=False)
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.cancel_requested_at is None
    assert services.oracle_run_execute_inline(run_id=run.pk) == ChunkOutcome.DONE
    after = dict(OracleLabel.objects.filter(run=run).values_list("window_id", "pk"))
    assert labels_per_window(run) == sorted(w.pk for w in windows)
    assert {w: after[w] for w in kept} == kept  # the first labels untouched


def test_cancel_stops_before_any_new_request(admin_user, cohort_data, rules):
    cohort, _, _ = cohort_data
    run = new_run(admin_user, cohort, rules)
    services.oracle_run_cancel(admin=admin_user, run=run)
    result = services.oracle_run_execute_chunk(run_id=run.pk)
    assert result.outcome == ChunkOutcome.STOPPED and result.claimed == 0
    assert not OracleLabel.objects.exists()
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED
    with pytest.raises(ValidationError, match="already cancelled"):
        services.oracle_run_cancel(admin=admin_user, run=run)


def test_a_second_run_on_the_same_windows_has_its_own_labels(
    admin_user, cohort_data, rules
):
    cohort, _, windows = cohort_data
    one = new_run(admin_user, cohort, rules)
    two = new_run(admin_user, cohort, rules)
    services.oracle_run_execute_inline(run_id=one.pk)
    services.oracle_run_execute_inline(run_id=two.pk)
    assert (
        labels_per_window(one)
        == labels_per_window(two)
        == sorted(w.pk for w in windows)
    )


def test_failures_are_recorded_with_reason_and_retried_alone(
    admin_user, cohort_data, fake_llm
):
    """A reply that is not JSON, twice (with the repair retry), is a failure with
    its reason and raw text, never a label; retry_failed forgets only those."""
    cohort, _, windows = cohort_data
    backbone = fake_backbone(admin_user, fake_llm)
    for _ in range(2):
        fake_llm.push(content="this is not json")
    run = new_run(admin_user, cohort, backbone)
    # One window alone first, so both scripted replies go to it.
    services.oracle_run_execute_chunk(run_id=run.pk, chunk_size=1)
    assert services.oracle_run_execute_inline(run_id=run.pk) == ChunkOutcome.DONE
    failed = OracleLabel.objects.get(run=run, state=OracleLabelState.FAILED)
    assert failed.payload == {} and failed.status == ""
    assert failed.error and "this is not json" in failed.raw_response
    ok = OracleLabel.objects.filter(run=run, state=OracleLabelState.OK)
    assert ok.count() == len(windows) - 1
    progress = selectors.oracle_run_progress(admin=admin_user, run=run)
    assert progress["failed"] == 1 and progress["failure_reasons"]
    assert progress["failures"][0]["window_id"] == failed.window_id
    ok_ids = sorted(ok.values_list("pk", flat=True))
    assert (
        services.oracle_run_retry_failed(admin=admin_user, run=run, enqueue=False) == 1
    )
    assert services.oracle_run_execute_inline(run_id=run.pk) == ChunkOutcome.DONE
    assert not OracleLabel.objects.filter(
        run=run, state=OracleLabelState.FAILED
    ).exists()
    assert OracleLabel.objects.get(run=run, window=failed.window).state == "ok"
    assert set(ok_ids) <= set(
        OracleLabel.objects.filter(run=run).values_list("pk", flat=True)
    )
    with pytest.raises(ValidationError, match="nothing to retry"):
        services.oracle_run_retry_failed(admin=admin_user, run=run)


def test_only_admins_create_cancel_resume_or_read_runs(
    admin_user, physician, cohort_data, rules
):
    cohort, _, _ = cohort_data
    with pytest.raises(PermissionDenied):
        new_run(physician, cohort, rules)
    assert OracleRun.objects.count() == 0
    run = new_run(admin_user, cohort, rules)
    for call in (
        services.oracle_run_cancel,
        services.oracle_run_resume,
        services.oracle_run_retry_failed,
        selectors.oracle_run_progress,
    ):
        with pytest.raises(PermissionDenied):
            call(admin=physician, run=run)
    with pytest.raises(PermissionDenied):
        services.backbone_create(admin=physician, name="x", kind="rules")
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.cancel_requested_at is None


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"kind": "openai", "base_url": "", "model": "m"}, "base_url"),
        (
            {
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": "sk-live-123",
            },
            "api_key_env",
        ),
        ({"kind": "rules", "base_url": "http://127.0.0.1:9/v1"}, "base_url"),
        (
            {
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "concurrency": 0,
            },
            "concurrency",
        ),
    ],
)
def test_backbone_validation_refuses_and_writes_nothing(admin_user, fields, field):
    with pytest.raises(ValidationError) as error:
        services.backbone_create(admin=admin_user, name="b", **fields)
    assert field in error.value.message_dict
    from oracle.models import Backbone

    assert not Backbone.objects.filter(name="b").exists()


def test_backbone_update_keeps_runs_snapshots(admin_user, cohort_data, rules):
    cohort, _, _ = cohort_data
    run = new_run(admin_user, cohort, rules)
    services.backbone_update(admin=admin_user, backbone=rules, concurrency=3)
    run.refresh_from_db()
    rules.refresh_from_db()
    assert rules.concurrency == 3
    assert run.backbone_snapshot["concurrency"] != 3
    with pytest.raises(ValidationError, match="kind cannot change"):
        services.backbone_update(admin=admin_user, backbone=rules, kind="openai")
