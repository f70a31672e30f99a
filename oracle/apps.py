from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _defaults_ensure(sender, using="default", **kwargs) -> None:
    """After every migrate (so `make run`'s bootstrap leaves them): the rules
    backbone and the default hindsight prompt, with which the Oracle runs with
    no LLM configured. Both are made only if absent."""
    from oracle.prompts import prompt_default_get_or_create
    from oracle.selectors import backbone_rules_default

    if using != "default":
        return
    backbone_rules_default()
    prompt_default_get_or_create()


class OracleConfig(AppConfig):
    name = "oracle"

    def ready(self) -> None:
        post_migrate.connect(
            _defaults_ensure, sender=self, dispatch_uid="oracle_defaults_ensure"
        )
        _jobs_register()


def _jobs_register() -> None:
    """Oracle runs and validations under the reaper (jobs.reaper). A run's
    chunks write its heartbeat; when they all stop, its lanes are queued again
    (oracle.services.oracle_run_requeue), and after five losses in a row with
    no chunk finished it fails with the reason (resumable from its page)."""
    from jobs.registry import JobKind, register
    from oracle.models import RunState, ValidationJobState

    # The task names, not the services: importing oracle.services here would
    # import pandas (through the prompts' context) into every process that
    # starts Django, each command included (issue 20).
    # tests/test_startup_imports.py checks that the names match.
    CHUNK_TASK = "oracle.tasks.oracle_run_chunk_task"
    VALIDATION_TASK = "oracle.tasks.oracle_validation_task"

    def oracle_run_requeue(*args, **kwargs):
        from oracle.services.runs import oracle_run_requeue

        return oracle_run_requeue(*args, **kwargs)

    register(
        JobKind(
            name="oracle-run",
            model="oracle.OracleRun",
            task=CHUNK_TASK,
            states=RunState,
            max_attempts=5,
            requeue=oracle_run_requeue,
        )
    )
    register(
        JobKind(
            name="oracle-validation",
            model="oracle.ValidationJob",
            task=VALIDATION_TASK,
            states=ValidationJobState,
        )
    )
