"""Reads of the exports app, each scoped to what the user may see: researchers
and admins see built releases (admins also those queued, building or failed),
their own submissions, and the public ones on a leaderboard."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db.models import Prefetch, QuerySet

from accounts.roles import user_is_admin
from annotation.models import Campaign
from datause.selectors import release_access_check, releases_refused
from exports.building.manifest import release_file_source
from exports.metric_names import METRIC_KEYS
from exports.models import (
    Release,
    ReleaseFile,
    ReleaseKind,
    ReleaseState,
    ReleaseWindow,
    Submission,
    SubmissionState,
)
from exports.roles import user_may_use_releases
from oracle.models import OracleRun, RunState, ValidationReport
from oracle.selectors import validation_report_latest
from realicu_web.storage import StoredFile


def _releases_visible(*, user) -> QuerySet[Release]:
    if not user_may_use_releases(user):
        return Release.objects.none()
    qs = Release.objects.select_related("campaign", "oracle_run", "created_by")
    if not user_is_admin(user):
        qs = qs.filter(state=ReleaseState.READY)
    return qs.order_by("-created_at", "-id")


def release_list(*, user) -> QuerySet[Release]:
    """The releases the user may list: for a researcher, the ready ones, less
    those built from credentialed data they hold no credential for
    (datause.selectors.releases_refused)."""
    qs = _releases_visible(user=user)
    refused = releases_refused(user=user, releases=qs)
    return qs.exclude(pk__in=refused) if refused else qs


def release_get(*, user, release_id: int) -> Release | None:
    """A release the user may see, or None (a 404); one they may see but
    not receive for want of a credential raises datause's
    CredentialRequired (a 403 that says which credential)."""
    release = _releases_visible(user=user).filter(pk=release_id).first()
    if release is not None:
        release_access_check(user=user, release=release)
    return release


def release_files(*, release: Release) -> QuerySet[ReleaseFile]:
    """The files of a ready release (a build stores them before it publishes)."""
    if release.state != ReleaseState.READY:
        return ReleaseFile.objects.none()
    return release.files.order_by("path")


def release_file_get(
    *, user, release_id: int, path: str
) -> tuple[ReleaseFile, Path | StoredFile] | None:
    """A file of a ready release the user may see, by its path in the release,
    with where it is read from (its local file, or its object in the store);
    only paths the release lists are served, so nothing outside its folder."""
    release = release_get(user=user, release_id=release_id)
    if release is None or release.state != ReleaseState.READY:
        return None
    entry = ReleaseFile.objects.filter(release=release, path=path).first()
    if entry is None:
        return None
    source = release_file_source(release, entry.path)
    if source is None:
        return None
    return entry, source


def release_windows(
    *,
    release: Release,
    stay_id: int | None = None,
    disease_group: str | None = None,
    hours_min: float | None = None,
    hours_max: float | None = None,
) -> QuerySet[ReleaseWindow]:
    """The release's window records, by stay and time, filtered. ``hours_min``
    and ``hours_max`` bound the window's start in hours since ICU admission,
    both inclusive. None before the release is ready: its build commits them
    in batches before it publishes it."""
    if release.state != ReleaseState.READY:
        return ReleaseWindow.objects.none()
    qs = ReleaseWindow.objects.filter(release=release)
    if stay_id is not None:
        qs = qs.filter(stay_id=stay_id)
    if disease_group:
        qs = qs.filter(disease_group=disease_group)
    if hours_min is not None:
        qs = qs.filter(hours_since_admit__gte=hours_min)
    if hours_max is not None:
        qs = qs.filter(hours_since_admit__lte=hours_max)
    return qs.order_by("stay_id", "hours_since_admit", "window_id")


def submission_list(*, user, release: Release | None = None) -> QuerySet[Submission]:
    """The user's own submissions (an admin's view is the same: scores are the
    researcher's until published)."""
    if not user_may_use_releases(user):
        return Submission.objects.none()
    qs = Submission.objects.filter(submitted_by=user).select_related("release")
    if release is not None:
        qs = qs.filter(release=release)
    return qs.order_by("-created_at", "-id")


def submission_get(*, user, submission_id: int) -> Submission | None:
    """One's own submission, or a public one on a release one may see."""
    if not user_may_use_releases(user):
        return None
    submission = (
        Submission.objects.select_related("release", "submitted_by")
        .filter(pk=submission_id)
        .first()
    )
    if submission is None:
        return None
    if submission.submitted_by_id == user.pk:
        return submission
    if (
        submission.public
        and submission.state == SubmissionState.SCORED
        and (release_get(user=user, release_id=submission.release_id) is not None)
    ):
        return submission
    return None


def _metric_rows(breakdown: dict) -> list[dict]:
    return [{"group": group, **values} for group, values in breakdown.items()]


def submission_page(*, user, submission_id: int) -> dict | None:
    """What a submission's page shows (None: not the user's to see): its
    scores as the release's kind scores them, and the table that shows them.
    The reaper's check for the job runs first, as on every job's page."""
    from jobs.reaper import job_check

    submission = submission_get(user=user, submission_id=submission_id)
    if submission is None:
        return None
    job_check(submission)
    scores = submission.scores or {}
    context = {
        "submission": submission,
        "overall": scores.get("overall"),
        "scored": submission.state == SubmissionState.SCORED,
        "mine": submission.submitted_by_id == user.pk,
    }
    if submission.release.kind == ReleaseKind.SURVEILLANCE:
        by_hours = scores.get("action_accuracy_by_hours_since_admit", {})
        return {
            **context,
            "scores_table": "surveillance/partials/_scores.html",
            "by_hours": sorted(by_hours.items(), key=lambda kv: float(kv[0])),
        }
    from evaluation.matcher import tau_source_of
    from exports.scoring_ppi import interval_rows

    return {
        **context,
        "scores_table": "exports/partials/_scores.html",
        "show_k": True,
        "by_group": _metric_rows(scores.get("by_disease_group", {})),
        "by_hours": _metric_rows(scores.get("by_hours_since_admit", {})),
        "metric_keys": METRIC_KEYS,
        # Scale: the prediction-powered intervals against physicians (issue 33).
        "intervals": interval_rows(scores.get("intervals"), submission.k),
        # Recorded when scored; scores from before it was recorded get today's.
        "tau_source": scores.get("tau_source")
        or (
            tau_source_of(scores["matcher_model"], scores["tau"])
            if scores.get("matcher_model") and scores.get("tau") is not None
            else ""
        ),
    }


def leaderboard(*, user, release: Release) -> list[dict]:
    """Public, scored submissions of the release, best problems Hit@k first;
    baselines (agents' runs on the platform) carry their ``baseline`` facts."""
    if release_get(user=user, release_id=release.pk) is None:
        return []
    keys, best = METRIC_KEYS, "problems_hit_at_k"
    if release.kind == ReleaseKind.SURVEILLANCE:
        from exports.scoring_surveillance import LEADERBOARD_KEYS as keys

        best = "action_accuracy"
    rows = []
    for s in Submission.objects.filter(
        release=release, public=True, state=SubmissionState.SCORED
    ).select_related("submitted_by"):
        overall = s.scores.get("overall", {})
        rows.append(
            {
                "submission": s,
                "author": s.submitted_by.get_username(),
                "k": s.k,
                "baseline": s.baseline or None,
                # Scale: each figure's 95 % interval against physicians (issue 33).
                "intervals": (s.scores.get("intervals") or {}).get("figures") or {},
                **{key: overall.get(key) for key in keys},
            }
        )
    rows.sort(key=lambda r: -(r[best] or 0.0))
    return rows


def leaderboard_plumbing_only(rows: list[dict]) -> bool:
    """Whether a baseline on the board was predicted by a fake or test LLM
    (agents.models.backbone_is_fake): its scores test the plumbing only."""
    return any((r["baseline"] or {}).get("plumbing_only") for r in rows)


def leaderboard_page(*, user, release: Release) -> dict:
    """What a release's leaderboard shows: its rows, and whether a baseline on
    it tests the plumbing only."""
    rows = leaderboard(user=user, release=release)
    return {
        "release": release,
        "rows": rows,
        "plumbing_only": leaderboard_plumbing_only(rows),
    }


def release_list_page(*, user) -> dict:
    """The releases the user may see, and what an admin may build one from."""
    return {
        "releases": release_list(user=user),
        **release_build_choices(user=user),
    }


def release_page(*, user, release: Release) -> dict:
    """What a release's page shows: its state (a build whose worker is gone
    queued again, or failed, first: jobs.reaper), its files once ready, the
    user's submissions, and where its matcher's tau came from."""
    from django.utils import timezone

    from evaluation.matcher import tau_source_of
    from jobs.reaper import job_check

    job_check(release)
    ready = release.state == ReleaseState.READY
    return {
        "release": release,
        "ready": ready,
        "is_admin": user_is_admin(user),
        "heartbeat_age": (
            round((timezone.now() - release.heartbeat_at).total_seconds())
            if release.heartbeat_at
            else None
        ),
        "files": release_files(release=release) if ready else [],
        "submissions": submission_list(user=user, release=release),
        # A surveillance release has no matcher (its labels come from rules).
        "tau_source": (
            tau_source_of(release.matcher_model, release.tau)
            if release.matcher_model
            else ""
        ),
    }


@dataclass(frozen=True)
class ReleaseDetail:
    """A release the user may see, and its page (``release_page``) read when a
    page is shown: a view that redirects after its write does without it."""

    user: object
    release: Release

    def page(self) -> dict:
        return release_page(user=self.user, release=self.release)


def release_detail_get(*, user, release_id: int) -> ReleaseDetail:
    """The release (``release_get``; Http404 for one the user may not see) with
    its page's read."""
    from django.http import Http404

    release = release_get(user=user, release_id=release_id)
    if release is None:
        raise Http404("No such release.")
    return ReleaseDetail(user=user, release=release)


def release_new_page(
    *, user, run_id: int | None = None, report_id: int | None = None, strict=True
) -> dict:
    """The promote page's reads: the Oracle run's promotion (``promotion_get``)
    when ``run_id`` names one, and the runs an admin can release. Http404 for a
    ``run_id`` naming no run the user may promote, unless not ``strict``."""
    from django.http import Http404

    promotion = None
    if run_id is not None:
        promotion = promotion_get(user=user, run_id=run_id, report_id=report_id)
        if promotion is None and strict:
            raise Http404("No such Oracle run.")
    return {
        **(promotion or {}),
        "runs": release_build_choices(user=user)["runs"],
    }


def release_build_choices(*, user) -> dict:
    """Campaigns, completed Oracle runs and cohorts (surveillance) an admin can
    release."""
    from windows.models import Cohort

    if not user_is_admin(user):
        return {"campaigns": [], "runs": [], "cohorts": []}
    return {
        "cohorts": list(Cohort.objects.order_by("-created_at")),
        "campaigns": list(Campaign.objects.order_by("-created_at")),
        "runs": list(
            OracleRun.objects.filter(state=RunState.COMPLETED).order_by("-created_at")
        ),
    }


# Oracle runs and their validation (admins only) -------------------------------


def _oracle_runs(user) -> QuerySet[OracleRun]:
    if not user_is_admin(user):
        return OracleRun.objects.none()
    return OracleRun.objects.select_related("prompt", "campaign", "cohort")


def oracle_runs_with_reports(*, user) -> QuerySet[OracleRun]:
    """Every Oracle run, newest first, each with ``reports`` (its validation
    reports, newest first, in one extra query). Admins only: a researcher reads
    a run's validation in the manifest of a Scale release built from it."""
    reports = ValidationReport.objects.select_related("campaign").order_by(
        "-created_at", "-id"
    )
    return (
        _oracle_runs(user)
        .prefetch_related(
            Prefetch("validation_reports", queryset=reports, to_attr="reports")
        )
        .order_by("-created_at", "-id")
    )


def oracle_run_get(*, user, run_id: int) -> OracleRun | None:
    return _oracle_runs(user).filter(pk=run_id).first()


def run_latest_report(run: OracleRun) -> ValidationReport | None:
    """The run's newest validation report, from the prefetched ``reports``
    when the run came from ``oracle_runs_with_reports``."""
    if hasattr(run, "reports"):
        return run.reports[0] if run.reports else None
    return validation_report_latest(run=run)


def promotion_get(*, user, run_id: int, report_id: int | None = None) -> dict | None:
    """What the promote page shows for an Oracle run: the run, the validation
    report a Scale release would carry (``report_id`` if it is one of the run's,
    else the newest), and that report's headline figures. None when the user is
    not an admin or there is no such run."""
    run = oracle_run_get(user=user, run_id=run_id)
    if run is None:
        return None
    report = None
    if report_id is not None:
        report = (
            ValidationReport.objects.select_related("campaign")
            .filter(run=run, pk=report_id)
            .first()
        )
    if report is None:
        report = validation_report_latest(run=run)
    return {"run": run, "report": report, "figures": report_figures(report)}


def report_figures(report: ValidationReport | None) -> dict | None:
    """Headline figures of a validation report (paper Table 1): status macro-F1
    and accuracy, the set tasks' semantic F1, the windows compared."""
    if report is None:
        return None
    body = report.report or {}
    return {
        "n_windows": body.get("n_windows"),
        "n_missing": body.get("n_missing"),
        "status_macro_f1": body.get("status_macro_f1"),
        "status_accuracy": body.get("status_accuracy"),
        "tasks": [
            {"task": key, "label": label, "f1": (body.get(key) or {}).get("f1")}
            for key, label in (
                ("acute_problems", "Acute problems"),
                ("recommended_actions", "Recommended actions"),
                ("red_flags", "Red flags"),
            )
        ],
    }
