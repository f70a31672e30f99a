"""Writes of the exports app: creating a release (admins), submitting and
scoring predictions (researchers), publishing a submission, API tokens."""

from __future__ import annotations

import logging
import tempfile
import uuid
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from accounts.roles import require_admin
from annotation.models import Campaign, ConsensusLabel, WindowAgreement
from evaluation.matcher import configured_model_name, matcher_for_settings
from evaluation.metrics import DEFAULT_K
from exports.models import (
    ApiToken,
    Release,
    ReleaseKind,
    ReleaseState,
    Submission,
    SubmissionState,
)
from exports.roles import user_may_use_releases
from exports.submission_files import (
    _submissions_dir,
    submission_file_local,
    submission_file_put,
    submission_plot_put,
    submission_plots_dir,
)
from exports.tokens import IssuedToken, token_store
from jobs.outbox import outbox_send
from jobs.progress import Progress
from oracle.models import (
    OracleLabel,
    OracleLabelState,
    OracleRun,
    PromotionOverride,
    RunState,
    ValidationReport,
)
from oracle.promotion_gate import gate_failure_text, promotion_gate
from oracle.selectors import validation_report_latest
from realicu_web.storage import object_store
from windows.models import Cohort

logger = logging.getLogger(__name__)


def _require_release_user(user) -> None:
    if not user_may_use_releases(user):
        raise PermissionDenied("Only researchers and admins can use releases.")


# Releases -------------------------------------------------------------------


def _gold_matcher(campaign: Campaign) -> tuple[str, float]:
    agreement = (
        WindowAgreement.objects.filter(campaign=campaign)
        .order_by("-computed_at")
        .values_list("matcher_model", "tau")
        .first()
    )
    if agreement:
        return agreement
    matcher = matcher_for_settings()
    return configured_model_name(), matcher.tau


def release_create(
    *,
    user,
    kind: str,
    campaign: Campaign | None = None,
    oracle_run: OracleRun | None = None,
    validation_report: ValidationReport | None = None,
    cohort: Cohort | None = None,
    notes: str = "",
    override_reason: str = "",
) -> Release:
    """A queued release, version = the kind's last + 1. Gold needs a campaign
    with finished consensus; Scale an Oracle run that completed with labels and
    has been validated against Gold (spec section 7). A Scale release carries
    ``validation_report`` (one of the run's, e.g. the one shown next to the
    promote button) or else the run's newest report, and that report's figures
    must reach the promotion thresholds (oracle.promotion_gate).
    Below them, only an admin's ``override_reason`` lets the release through;
    the override (who, when, why, the failed thresholds) is recorded with the
    release (PromotionOverride) and written into its manifest."""
    require_admin(user, "build a release")
    fields: dict = {"kind": kind, "notes": notes.strip(), "created_by": user}
    override: dict | None = None
    if kind == ReleaseKind.GOLD:
        if campaign is None:
            raise ValidationError(
                "Choose the Gold campaign whose consensus to release."
            )
        usable = ConsensusLabel.objects.filter(
            campaign=campaign, dropped=False, dispute_count=0
        ).count()
        if usable == 0:
            raise ValidationError(
                f"Campaign {campaign.name!r} has no window with a finished consensus "
                "(agreed, or with every dispute adjudicated); nothing to release."
            )
        fields["campaign"] = campaign
        fields["matcher_model"], fields["tau"] = _gold_matcher(campaign)
    elif kind == ReleaseKind.SCALE:
        if oracle_run is None:
            raise ValidationError("Choose the Oracle run whose labels to release.")
        if validation_report is not None and validation_report.run_id != oracle_run.pk:
            raise ValidationError(
                f"Validation report {validation_report.pk} is not a report of Oracle "
                f"run {oracle_run.pk}; choose one of the run's own reports."
            )
        report = validation_report or validation_report_latest(run=oracle_run)
        if report is None:
            raise ValidationError(
                f"Oracle run {oracle_run.pk} ({oracle_run.name!r}) has no validation "
                "report: validate it against a Gold campaign's consensus before it "
                "can label RealICU-Scale."
            )
        if oracle_run.state != RunState.COMPLETED:
            raise ValidationError(
                f"Oracle run {oracle_run.pk} is "
                f"{oracle_run.get_state_display().lower()}"
                "; only a completed run can be released."
            )
        if not OracleLabel.objects.filter(
            run=oracle_run, state=OracleLabelState.OK
        ).exists():
            raise ValidationError(
                f"Oracle run {oracle_run.pk} has no successful label to release."
            )
        gate = promotion_gate(report=report)
        if not gate["passed"]:
            reason = (override_reason or "").strip()
            if not reason:
                raise ValidationError(
                    [
                        f"Validation report {report.pk} of Oracle run {oracle_run.pk} "
                        "is below the promotion thresholds "
                        f"({gate['thresholds']['source']}):",
                        *(gate_failure_text(row) + "." for row in gate["failures"]),
                        "Improve the run and validate it again, or override with a "
                        "reason (it is recorded and written into the release "
                        "manifest).",
                    ]
                )
            override = {
                "run": oracle_run,
                "report": report,
                "reason": reason,
                "thresholds": gate["thresholds"],
                "failures": gate["failures"],
                "created_by": user,
            }
        fields.update(
            oracle_run=oracle_run,
            validation_report=report,
            matcher_model=report.matcher_model,
            tau=report.tau,
        )
    elif kind == ReleaseKind.SURVEILLANCE:
        # Labels come from rules over the concept tracks (spec section 10): no
        # matcher, no reviewer; the cohort's stays are checkpointed.
        if cohort is None:
            raise ValidationError("Choose the cohort whose stays to checkpoint.")
        if not cohort.stays.exists():
            raise ValidationError(f"Cohort {cohort.name!r} has no stays.")
        fields.update(cohort=cohort, matcher_model="", tau=0.0)
    else:
        raise ValidationError(
            f"Unknown release kind {kind!r}: gold, scale or surveillance."
        )
    for _attempt in range(5):
        try:
            with transaction.atomic():
                last = Release.objects.filter(kind=kind).aggregate(v=Max("version"))[
                    "v"
                ]
                release = Release.objects.create(version=(last or 0) + 1, **fields)
                if override is not None:
                    PromotionOverride.objects.create(release_id=release.pk, **override)
                _release_build_send(release)
                return release
        except IntegrityError:
            continue  # another build took this version meanwhile
    raise ValidationError("Could not number the release; try again.")


def gold_open_windows_warning(campaign: Campaign) -> str:
    """The warning a Gold build of ``campaign`` gets while some of its windows
    are still open (no consensus yet, or an open dispute): they are not in the
    release. "" when every window is closed."""
    from annotation.models import CampaignWindow

    total = CampaignWindow.objects.filter(campaign=campaign).count()
    closed = ConsensusLabel.objects.filter(campaign=campaign, dispute_count=0).count()
    open_windows = max(0, total - closed)
    if not open_windows:
        return ""
    return (
        f"{open_windows} of {total} windows of campaign {campaign.name!r} are still "
        "open (awaiting labels or with open disputes): they are not in this Gold "
        "release. Build again once they are closed."
    )


def _release_build_send(release: Release) -> None:
    """The build's task, recorded in the transaction that queues the release
    and sent after it commits (jobs.outbox): a broker that cannot be reached
    delays the build until the reaper sends it, and never loses it."""
    outbox_send(
        task="exports.tasks.release_build_task",
        args=[release.pk],
        key=f"job:release:{release.pk}",
    )


def _release_locked(release: Release) -> Release:
    locked = Release.objects.select_for_update().filter(pk=release.pk).first()
    if locked is None:
        raise ValidationError("That release no longer exists.")
    return locked


def _release_state_require(release: Release, states: tuple, only: str) -> None:
    """ValidationError, saying the release's state, unless it is one of
    ``states``; ``only`` says what may be done in them."""
    if release.state not in states:
        raise ValidationError(
            f"{release} is {release.get_state_display().lower()}; only {only}."
        )


@transaction.atomic
def release_retry(*, user, release: Release) -> Release:
    """Queues a failed or cancelled release again: the same release (kind,
    version, inputs) is built from the start."""
    require_admin(user, "retry a release build")
    release = _release_locked(release)
    _release_state_require(
        release,
        (ReleaseState.FAILED, ReleaseState.CANCELLED),
        "a failed or cancelled build can be retried",
    )
    from exports.building.manifest import release_published_exists

    if release_published_exists(release.name):
        raise ValidationError(
            f"The folder {release.name} already exists and a release's folder is "
            "never rewritten: rebuild as a new version instead."
        )
    Release.objects.filter(pk=release.pk).update(
        state=ReleaseState.QUEUED,
        error="",
        lease="",
        worker="",
        attempts=0,
        heartbeat_at=None,
        started_at=None,
        finished_at=None,
        progress_done=0,
        progress_total=0,
        progress_label=f"retry queued by {user.get_username()}",
    )
    _release_build_send(release)
    release.refresh_from_db()
    return release


def release_cancel(*, user, release: Release) -> Release:
    """Stops a queued or building release: its worker finds its lease gone at
    its next progress report and stops, undoing what it wrote; the unfinished
    folder is removed."""
    from exports.building import release_partial_remove

    require_admin(user, "cancel a release build")
    with transaction.atomic():
        release = _release_locked(release)
        _release_state_require(
            release,
            (ReleaseState.QUEUED, ReleaseState.BUILDING),
            "a queued or building release can be cancelled",
        )
        Release.objects.filter(pk=release.pk).update(
            state=ReleaseState.CANCELLED,
            lease="",
            finished_at=timezone.now(),
            error=f"Cancelled by {user.get_username()}.",
            progress_label="cancelled",
        )
    # After the commit: a worker still writing finds its lease gone and removes
    # whatever it writes after this.
    release_partial_remove(release)
    release.refresh_from_db()
    return release


def release_rebuild(*, user, release: Release) -> Release:
    """A new version of a ready release from the same inputs (campaign, or
    Oracle run with its validation report), queued for building; the ready
    release and its files stay as they are. A Scale release that passed the
    promotion gate by an override carries the same reason."""
    require_admin(user, "rebuild a release")
    _release_state_require(
        release,
        (ReleaseState.READY,),
        "a ready release is rebuilt as a new version (retry a failed or cancelled one)",
    )
    override = PromotionOverride.objects.filter(release_id=release.pk).first()
    return release_create(
        user=user,
        kind=release.kind,
        campaign=release.campaign,
        oracle_run=release.oracle_run,
        validation_report=release.validation_report,
        cohort=release.cohort,
        notes=f"Rebuild of {release.name}. {release.notes}".strip(),
        override_reason=override.reason if override is not None else "",
    )


# Submissions ----------------------------------------------------------------


def _upload_lines(upload, sink, digest, max_bytes: int):
    """Lines of an uploaded file, copied to ``sink`` and hashed on the way."""
    size = 0
    for line in upload:
        size += len(line)
        if size > max_bytes:
            raise ValidationError(
                f"The file is larger than {max_bytes // (1024 * 1024)} MB; split it "
                "or ask an admin to raise REALICU_SUBMISSION_MAX_BYTES."
            )
        sink.write(line)
        digest.update(line)
        yield line


def release_require_ready(release: Release) -> None:
    """Predictions go to a ready release only: one being built, failed or
    cancelled has no windows to score against."""
    if release.state != ReleaseState.READY:
        raise ValidationError(
            f"{release} is {release.get_state_display().lower()}, not ready: "
            "predictions can only be submitted to a ready release."
        )


def submission_create(
    *,
    user,
    release: Release,
    upload,
    model_name: str,
    k: int = DEFAULT_K,
    public: bool = False,
) -> Submission:
    """Validates an uploaded prediction JSONL against the release and, only if
    every line is valid, stores it and queues its scoring. ``upload`` is a
    file-like object yielding lines of bytes (a Django upload, an open file).
    A refused file leaves nothing behind; its messages name the lines."""
    import hashlib

    from exports.scoring import check_k, predictions_check

    _require_release_user(user)
    release_require_ready(release)
    model_name = (model_name or "").strip()
    if not model_name:
        raise ValidationError("Name the model the predictions come from.")
    if len(model_name) > 100:
        raise ValidationError("The model name is longer than 100 characters.")
    check_k(k)
    folder = _submissions_dir()
    temporary = folder / f".upload-{uuid.uuid4().hex}.jsonl"
    digest = hashlib.sha256()
    try:
        with open(temporary, "wb") as sink:
            messages, count = predictions_check(
                lines=_upload_lines(
                    upload, sink, digest, settings.REALICU_SUBMISSION_MAX_BYTES
                ),
                release=release,
            )
        if messages:
            raise ValidationError(messages)
        with transaction.atomic():
            submission = Submission.objects.create(
                release=release,
                submitted_by=user,
                model_name=model_name,
                k=k,
                public=bool(public),
                file_path="",
                sha256=digest.hexdigest(),
                prediction_count=count,
            )
            relative = f"{release.name}/{submission.pk}.jsonl"
            submission_file_put(relative=relative, source=temporary)
            submission.file_path = relative
            submission.save(update_fields=["file_path"])
            outbox_send(
                task="exports.tasks.submission_score_task",
                args=[submission.pk],
                key=f"job:submission:{submission.pk}",
            )
        return submission
    finally:
        temporary.unlink(missing_ok=True)


PLOTS = {
    "by_disease_group": "Scores by disease group",
    "by_hours_since_admit": "Scores by hours since ICU admission",
}


def submission_score(
    *, submission: Submission, matcher=None, progress=None
) -> Submission:
    """Scores a stored, valid submission with the release's matcher and tau.
    A job (jobs.leases): taken with a lease, progress on the row, stopped when
    the lease is lost. Idempotent: a scored submission, or one a live worker
    holds, is returned as it is."""
    from jobs.leases import JobLeaseLost, job_fail, job_heartbeat, job_release, job_take

    # A scored submission is not claimable: job_take returns None and the row.
    lease = job_take(submission, started_field=None, extra={"error": ""})
    if lease is None:
        return submission
    if submission.release.kind == ReleaseKind.SURVEILLANCE:
        from exports.scoring_surveillance import surveillance_submission_scores

        compute = surveillance_submission_scores
    else:

        def compute(submission, job_progress):
            return _realicu_submission_scores(submission, job_progress, matcher)

    try:
        with job_heartbeat(model=Submission, pk=submission.pk, lease=lease) as beat:
            job_progress = Progress(
                sinks=[beat, *(progress.sinks if progress is not None else [])]
            )
            scores = compute(submission, job_progress)
    except JobLeaseLost:
        submission.refresh_from_db()
        return submission
    except Exception as exc:
        job_fail(model=Submission, pk=submission.pk, lease=lease, error=exc)
        raise
    job_release(
        model=Submission,
        pk=submission.pk,
        lease=lease,
        state=SubmissionState.SCORED,
        scores=scores,
        scored_at=timezone.now(),
        progress_label="scored",
    )
    submission.refresh_from_db()
    return submission


def _realicu_submission_scores(submission: Submission, job_progress, matcher) -> dict:
    """A RealICU submission's scores (spec section 8), with its breakdown plots
    written beside it."""
    # Scoring is imported here, not with the module: it brings in the REST
    # framework's parsers, most of a release build's start-up (issue 20).
    from exports.scoring import breakdown_plot, predictions_read, scores_compute

    with submission_file_local(submission) as path:
        predictions = list(predictions_read(path))
    scores = scores_compute(
        release=submission.release,
        predictions=predictions,
        k=submission.k,
        matcher=matcher,
        progress=job_progress,
    )
    store = object_store()
    with tempfile.TemporaryDirectory(prefix="realicu-plots-") as scratch:
        plots = submission_plots_dir(submission) if store is None else Path(scratch)
        plots.mkdir(parents=True, exist_ok=True)
        for name, title in PLOTS.items():
            breakdown_plot(
                breakdown=scores[name],
                title=title,
                path=plots / f"{name}.png",
                k=submission.k,
            )
            if store is not None:
                submission_plot_put(submission, name, plots / f"{name}.png")
    return scores


@transaction.atomic
def submission_publish(*, user, submission: Submission, public: bool) -> Submission:
    """Shows a submission on its release's leaderboard, or takes it off; only
    its author may."""
    _require_release_user(user)
    if submission.submitted_by_id != user.pk:
        raise PermissionDenied("Only the researcher who submitted it can publish it.")
    submission.public = bool(public)
    submission.save(update_fields=["public"])
    return submission


# API tokens -----------------------------------------------------------------


def token_create(*, user) -> IssuedToken:
    """A new API token for the user, replacing any earlier one: its key is
    on the returned value only (to show once); the database keeps its hash."""
    _require_release_user(user)
    return token_store(user=user)


@transaction.atomic
def token_revoke(*, user) -> int:
    _require_release_user(user)
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted
