"""Reads composed for one Oracle page each (issue 37: a view calls one selector
and at most one service): a run's page and its polled progress, the resume
check, the run's labels and one label beside its window, and the validation
page with its polled job. Admin only, as every read they compose; each run's
job is checked by the reaper first (jobs.reaper), so a page shows what is
true."""

from __future__ import annotations

from types import SimpleNamespace

from jobs.reaper import job_check
from oracle.models import BackboneKind, OracleRun, ValidationJob
from oracle.selectors import (
    oracle_run_progress,
    run_get,
    run_not_resumable_reason,
    validation_job_current,
    validation_job_get,
    validation_job_progress,
    validation_report_get,
    validation_reports_of,
)
from oracle.selectors_labels import (
    LABEL_FILTERS,
    label_counts,
    oracle_label_shown,
    run_label_get,
    run_label_neighbours,
    run_labels_page,
)
from oracle.services.tokens import (
    budget_text,
    context_tokens,
    estimate_error,
    prompt_budget_parts,
    prompt_tokens_distribution,
)


def run_progress_get(*, admin, run_id) -> dict:
    """The run (Http404 for another id), checked by the reaper (a run whose
    workers died is queued again now), its progress, the distribution of its
    prompts' tokens and the prompt budget it labels with."""
    run = run_get(admin=admin, run_id=run_id)
    job_check(run)
    snapshot = run.backbone_snapshot or {}
    window = snapshot.get("context_tokens")
    if snapshot.get("kind") == BackboneKind.OPENAI and not window:
        window = context_tokens(run.backbone)
    budget = None
    if snapshot.get("kind") == BackboneKind.OPENAI:
        # The figures the run labels with (recorded on its snapshot by its
        # first chunk), else the backbone's now: the README's formula.
        live = run.backbone
        in_use = SimpleNamespace(
            context_tokens=snapshot.get("context_tokens") or live.context_tokens,
            max_completion_tokens=snapshot.get("max_completion_tokens")
            or live.max_completion_tokens,
        )
        budget = budget_text(prompt_budget_parts(in_use, template=run.prompt))
    return {
        "run": run,
        "prompt_tokens": prompt_tokens_distribution(run.labels.all(), window=window),
        "prompt_budget": budget,
        "estimate_error": estimate_error(run.labels.all()),
        "progress": oracle_run_progress(admin=admin, run=run),
        "snapshot": snapshot,
        "is_rules": snapshot.get("kind") == BackboneKind.RULES,
    }


def run_page(*, admin, run_id) -> dict:
    """``run_progress_get`` and the run's validation reports."""
    page = run_progress_get(admin=admin, run_id=run_id)
    page["reports"] = validation_reports_of(admin=admin, run=page["run"])
    return page


def run_resume_check(*, admin, run_id) -> tuple[OracleRun, str | None]:
    """The run, checked by the reaper, and why it cannot be resumed now (None
    when it can)."""
    run = run_get(admin=admin, run_id=run_id)
    job_check(run)
    return run, run_not_resumable_reason(run=run)


def _filter(state: str) -> str:
    return state if state in LABEL_FILTERS else ""


def run_labels_get(*, admin, run_id, state: str, page_number) -> dict:
    """One page of the run's windows with their Oracle labels (and each
    label's counts), filtered by ``state``."""
    run = run_get(admin=admin, run_id=run_id)
    page = run_labels_page(admin=admin, run=run, state=state, page=page_number)
    return {
        "run": run,
        "page": page,
        "rows": [(label, label_counts(label)) for label in page],
        "state": _filter(state),
        "filters": LABEL_FILTERS.items(),
    }


def run_label_page(*, admin, run_id, label_id, state: str) -> dict:
    """One Oracle label of the run (Http404 for another), as shown, and its
    neighbours under the ``state`` filter."""
    run = run_get(admin=admin, run_id=run_id)
    label = run_label_get(admin=admin, run=run, label_id=label_id)
    return {
        "run": run,
        "label": label,
        "shown": oracle_label_shown(admin=admin, label=label),
        "neighbours": run_label_neighbours(
            admin=admin, run=run, label=label, state=state
        ),
        "state": _filter(state),
    }


def _job(*, admin, run: OracleRun, job: ValidationJob | None) -> dict:
    if job is not None:
        job_check(job)  # a validation whose worker died is queued again now
    return {
        "run": run,
        "job": job,
        "job_progress": validation_job_progress(admin=admin, job=job) if job else None,
    }


def validation_page(*, admin, run_id, report_id=None, job_id=None) -> dict:
    """The run's validation reports, the one ``report_id`` names (Http404 for
    another) or the newest, and the validation ``job_id`` names (Http404 for
    another) or the one under way, with its progress."""
    run = run_get(admin=admin, run_id=run_id)
    reports = validation_reports_of(admin=admin, run=run)
    if report_id:
        report = validation_report_get(admin=admin, run=run, report_id=report_id)
    else:
        report = reports.first()
    if job_id:
        job = validation_job_get(admin=admin, run=run, job_id=job_id)
    else:
        job = validation_job_current(admin=admin, run=run)
    return {
        **_job(admin=admin, run=run, job=job),
        "reports": reports,
        "report": report,
    }


def validation_job_page(*, admin, run_id, job_id) -> dict:
    """A validation of the run (Http404 for another) and its progress."""
    run = run_get(admin=admin, run_id=run_id)
    job = validation_job_get(admin=admin, run=run, job_id=job_id)
    return _job(admin=admin, run=run, job=job)
