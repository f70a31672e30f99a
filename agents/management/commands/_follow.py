"""What agent_run and online_eval share: following a run's progress on one
line."""

from __future__ import annotations

import time

from django.core.management.base import CommandError

from agents.models import AgentRun, RunState
from jobs.progress import bar_line, command_stream

FOLLOW_SECONDS = 1.0


def progress_line(run: AgentRun) -> str:
    progress = run.live_progress
    failed = f" · {run.windows_failed} failed" if run.windows_failed else ""
    return bar_line(
        progress["percent"],
        f"{progress['done']}/{progress['total']} windows{failed} · "
        f"{run.tokens_in + run.tokens_out:,} tokens · "
        f"{run.get_state_display().lower()}",
    )


def follow(command, run: AgentRun, *, inline: bool) -> None:
    from agents.services import agent_run_inline

    out = command_stream(command)

    def show(_=None):
        run.refresh_from_db()
        out.write(progress_line(run))
        out.flush()

    if inline:
        agent_run_inline(run=run, on_window=show)
        show()
    else:
        from agents.services import agent_run_settle
        from jobs.reaper import job_check

        while True:
            show()
            if run.state not in (RunState.QUEUED, RunState.RUNNING):
                break
            # As the run page does: stays whose workers died are queued again
            # (or failed), and a run whose stays all ended is settled.
            for state in run.stays.filter(state__in=("queued", "running")):
                job_check(state)
            agent_run_settle(run=run)
            time.sleep(FOLLOW_SECONDS)
    out.write("\n")
    run.refresh_from_db()
    command.stdout.write(
        f"Run {run.pk}: {run.get_state_display().lower()}, "
        f"{run.windows_done}/{run.windows_total} windows "
        f"({run.windows_failed} failed), tokens in {run.tokens_in:,} "
        f"out {run.tokens_out:,}, cost {run.cost:.4f}."
    )
    if run.submission_id:
        submission = run.submission
        submission.refresh_from_db()
        command.stdout.write(
            f"Baseline submission {submission.pk}: {submission.get_state_display()}."
        )
    if run.state == RunState.FAILED:
        raise CommandError(run.error or "The run failed.")
    if run.state == RunState.CANCELLED:
        raise CommandError(f"Run {run.pk} was cancelled before it finished.")
    if run.windows_failed:
        # A run with failed windows is a failed run for a script or CI: the
        # exit status says so, with the reasons.
        raise CommandError(
            f"Run {run.pk}: {run.windows_failed} of {run.windows_total} windows "
            f"failed ({failure_reasons(run)})."
        )


def failure_reasons(run: AgentRun, shown: int = 5) -> str:
    """The run's window errors by reason, most frequent first."""
    from collections import Counter

    counts = Counter(
        (error.splitlines() or [""])[0][:200]
        for error in run.predictions.exclude(error="").values_list("error", flat=True)
    )
    return "; ".join(f"{n} × {reason}" for reason, n in counts.most_common(shown))
