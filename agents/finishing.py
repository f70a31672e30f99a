"""The end of an agent run (agents.services): a run whose stays all finished
becomes a public baseline submission of its release, scored as any other
(exports.services.submission_score); a run whose stays stopped with some
failed is failed, with their reasons, so that it can be resumed."""

from __future__ import annotations

import hashlib
import json

from django.db import transaction
from django.utils import timezone

from agents.models import AgentPrediction, AgentRun, AgentStayState, RunState, StayState
from exports.models import Submission
from jobs.outbox import outbox_send


def agent_run_settle(*, run: AgentRun) -> AgentRun:
    """A running run none of whose stays is queued or running any more, some
    of them failed (their workers kept dying, or an error): failed, with the
    stays' reasons, so that it can be resumed from its page."""
    stays = AgentStayState.objects.filter(run=run)
    if (
        run.state != RunState.RUNNING
        or stays.filter(state__in=(StayState.QUEUED, StayState.RUNNING)).exists()
    ):
        return run
    failed = list(stays.filter(state=StayState.FAILED).values_list("stay_id", "error"))
    if not failed:
        return agent_run_finish(run=run)
    reasons = "; ".join(f"stay {stay}: {error}" for stay, error in failed[:5])
    AgentRun.objects.filter(pk=run.pk, state=RunState.RUNNING).update(
        state=RunState.FAILED,
        finished_at=timezone.now(),
        error=f"{len(failed)} stay(s) failed ({reasons}). Resume to retry them.",
    )
    run.refresh_from_db()
    return run


def _submissions_dir():
    from exports.services import _submissions_dir as folder

    return folder()


def agent_run_finish(*, run: AgentRun, score_inline: bool = False) -> AgentRun:
    """When every stay is done: the predictions as a public baseline
    submission, queued for scoring (or scored now with ``score_inline``)."""
    from exports.models import SubmissionState
    from exports.services import submission_file_put

    with transaction.atomic():
        run = AgentRun.objects.select_for_update().get(pk=run.pk)
        if run.state != RunState.RUNNING or run.submission_id:
            return run
        if (
            AgentStayState.objects.filter(run=run)
            .exclude(state=StayState.DONE)
            .exists()
        ):
            return run
        predictions = list(
            AgentPrediction.objects.filter(run=run, error="").order_by(
                "stay_id", "window_id"
            )
        )
        if not predictions:
            run.state = RunState.FAILED
            run.error = "No window was predicted; see the windows' errors."
            run.finished_at = timezone.now()
            run.save(update_fields=["state", "error", "finished_at"])
            return run
        lines = [
            json.dumps(
                {"window_id": p.window_id, "stay_id": p.stay_id, **p.prediction},
                ensure_ascii=False,
            )
            for p in predictions
        ]
        content = ("\n".join(lines) + "\n").encode("utf-8")
        backbone = run.backbone
        model_name = f"{run.label} · {run.prompt_version}"
        if backbone is not None:
            model_name += f" · {backbone.name}"
        submission = Submission.objects.create(
            release=run.release,
            submitted_by=run.created_by,
            model_name=model_name[:100],
            public=True,
            file_path="",
            sha256=hashlib.sha256(content).hexdigest(),
            prediction_count=len(predictions),
            baseline={
                "run_id": run.pk,
                "agent": run.label,
                "prompt_version": run.prompt_version,
                "backbone": backbone.name if backbone else "",
                "model": backbone.model if backbone else "",
                "endpoint": run.endpoint.url if run.endpoint_id else "",
                "plumbing_only": run.plumbing_only,
            },
        )
        folder = _submissions_dir() / run.release.name
        folder.mkdir(parents=True, exist_ok=True)
        relative = f"{run.release.name}/{submission.pk}.jsonl"
        temporary = folder / f".agent-{submission.pk}.jsonl"
        temporary.write_bytes(content)
        submission_file_put(relative=relative, source=temporary)
        submission.file_path = relative
        submission.save(update_fields=["file_path"])
        run.submission = submission
        run.state = RunState.DONE
        run.finished_at = timezone.now()
        run.progress_label = "scoring the predictions"
        run.save(update_fields=["submission", "state", "finished_at", "progress_label"])
        if not score_inline:
            outbox_send(
                task="exports.tasks.submission_score_task",
                args=[submission.pk],
                key=f"job:submission:{submission.pk}",
            )
    if score_inline and submission.state == SubmissionState.QUEUED:
        from exports.services import submission_score

        submission_score(submission=submission)
    return run
