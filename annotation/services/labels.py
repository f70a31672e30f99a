"""Writes of physicians' labels: drafts, submits and reopens, each save checked
against the label's rules and kept in the label's history."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from accounts.roles import user_is_physician
from annotation.blindness import co_rater_labels_visible, window_is_closed
from annotation.evidence import NOT_OF_STAY, evidence_refused, hindsight_refusal
from annotation.models import (
    Assignment,
    AssignmentState,
    CampaignWindow,
    Label,
    LabelRevision,
    RevisionKind,
)
from annotation.selectors.labelling import recorded_critical_actions
from annotation.services.agreement import on_label_reopened, on_label_submitted
from evaluation.labelschema import TEXT_LISTS, label_read

# Time on task: the client sends the seconds it saw the physician active since
# its last successful save; a save counts at most this many, and never more than
# the time since the label's previous save.
MAX_ACTIVE_SECONDS_PER_SAVE = 600
ACTIVE_SECONDS_SLACK = 5


def _require_physician(user) -> None:
    if not user_is_physician(user):
        raise PermissionDenied(
            "Only physicians label windows, and your account has no physician role."
        )


def _assignment_for_update(*, annotator, assignment_id) -> Assignment:
    """The annotator's assignment, locked for the rest of the transaction. Any
    id that is not theirs is a 404, whether it exists or not."""
    _require_physician(annotator)
    try:
        pk = int(assignment_id)
    except (TypeError, ValueError):
        raise Http404("No such assignment.") from None
    assignment = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("window", "window__stay", "campaign")
        .filter(pk=pk, annotator=annotator)
        .first()
    )
    if assignment is None:
        raise Http404("No such assignment.")
    if not assignment.active:
        raise PermissionDenied(
            "This window was reassigned to another physician; your work on it is "
            "kept but can no longer be changed."
        )
    return assignment


def _label_for_update(assignment: Assignment) -> Label | None:
    return Label.objects.select_for_update().filter(assignment=assignment).first()


def _version_check(label: Label | None, base_version) -> None:
    current = label.version if label is not None else 0
    if isinstance(base_version, bool) or not isinstance(base_version, int):
        try:
            base_version = int(base_version)
        except (TypeError, ValueError):
            raise ValidationError(
                "The label's version is missing; reload to continue.",
                code="version_missing",
            ) from None
    if base_version != current:
        raise ValidationError(
            "This label was changed in another tab or window (version %(version)s); "
            "reload to continue.",
            code="version_conflict",
            params={"version": current},
        )


def _active_seconds_bounded(
    *, label: Label | None, active_seconds, now: datetime
) -> int:
    try:
        seconds = int(active_seconds or 0)
    except (TypeError, ValueError):
        seconds = 0
    seconds = max(0, min(seconds, MAX_ACTIVE_SECONDS_PER_SAVE))
    if label is not None and label.updated_at is not None:
        elapsed = (now - label.updated_at).total_seconds()
        seconds = min(seconds, max(0, int(elapsed)) + ACTIVE_SECONDS_SLACK)
    return seconds


def _payload_clean(
    *,
    payload,
    assignment: Assignment,
    complete: bool,
) -> tuple[str, dict]:
    """The label's status and payload in canonical form, or a ValidationError
    whose messages, by field, say what to fix.

    The label's shape is checked by ``evaluation.labelschema.label_read``: a
    draft (``complete=False``) may be unfinished, a submit needs the status and
    no empty item. On top of it: evidence from the window's stay only, and no
    hindsight record (annotation.evidence), drafts included; a
    submit rates every recorded critical action of the window and nothing else,
    and, when the campaign requires evidence (``Campaign.evidence_required``),
    cites at least one event for each acute problem, added action and red flag.
    """
    if not isinstance(payload, dict):
        raise ValidationError("The label could not be read; reload to continue.")
    reading = label_read(payload, complete=complete)
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    for problem in reading.problems:
        add(problem.field, problem.message)

    refused = evidence_refused(
        window=assignment.window,
        ids={pk for ids in reading.cited.values() for pk in ids},
    )
    for field, ids in reading.cited.items():
        cited = [pk for pk in dict.fromkeys(ids) if pk in refused]
        foreign = [pk for pk in cited if refused[pk] == NOT_OF_STAY]
        hindsight = [pk for pk in cited if refused[pk] != NOT_OF_STAY]
        if foreign:
            add(
                field,
                "Evidence must come from this patient's stay; "
                f"event{'s' if len(foreign) > 1 else ''} "
                f"{', '.join(map(str, foreign[:5]))} "
                f"{'do' if len(foreign) > 1 else 'does'} not belong to it.",
            )
        if hindsight:
            add(field, hindsight_refusal(hindsight, refused))

    if complete and assignment.campaign.evidence_required:
        # The campaign's setting: each free-text item cites what it rests on. A
        # rating needs none of its own (it rates a cited event, the action), and
        # an empty item already has its message.
        for field, noun in TEXT_LISTS.items():
            for item in reading.payload[field]:
                if item["text"] and not item["evidence"]:
                    add(
                        field,
                        f'{noun} "{item["text"]}" has no evidence event; cite at '
                        "least one (campaign setting).",
                    )

    rated = {item["event_id"] for item in reading.payload["action_ratings"]}
    if complete and "action_ratings" not in errors:
        critical = list(
            recorded_critical_actions(assignment=assignment).values_list(
                "pk", "category", "name", "time"
            )
        )
        critical_ids = {row[0] for row in critical}
        not_critical = [pk for pk in rated if pk not in critical_ids]
        if not_critical:
            add(
                "action_ratings",
                f"Only this window's recorded critical actions can be rated; "
                f"event {', '.join(map(str, sorted(not_critical)[:5]))} is not one.",
            )
        unrated = [row for row in critical if row[0] not in rated]
        if unrated:
            first = unrated[0]
            add(
                "action_ratings",
                f"Rate every recorded critical action: {len(unrated)} of "
                f"{len(critical)} not rated yet (first: {first[1] or first[2]} at "
                f"{timezone.localtime(first[3]):%H:%M}).",
            )

    if errors:
        raise ValidationError(errors)
    return reading.status, reading.payload


def _label_write(
    *,
    assignment: Assignment,
    label: Label | None,
    annotator,
    status: str,
    body: dict,
    kind: str,
    active_seconds,
    submission_id: str | None = None,
) -> Label:
    now = timezone.now()
    seconds = _active_seconds_bounded(
        label=label, active_seconds=active_seconds, now=now
    )
    if label is None:
        label = Label(assignment=assignment)
    label.status = status
    label.payload = body
    label.version += 1
    label.time_on_task_seconds += seconds
    if kind == RevisionKind.SUBMIT:
        label.submitted_at = now
    if submission_id is not None:
        label.submission_id = submission_id
    label.save()
    LabelRevision.objects.create(
        label=label,
        version=label.version,
        kind=kind,
        author=annotator,
        saved_at=now,
        payload=label.as_payload(),
        time_on_task_seconds=label.time_on_task_seconds,
    )
    return label


def _refuse_if_submitted(assignment: Assignment) -> None:
    if assignment.state == AssignmentState.SUBMITTED:
        raise ValidationError(
            "This label is already submitted; reopen it to change it.",
            code="submitted",
        )


def _label_save(
    *,
    assignment: Assignment,
    label: Label | None,
    annotator,
    payload: dict,
    base_version,
    kind: str,
    active_seconds,
    submission_id: str | None = None,
) -> Label:
    """A draft's or a submit's checks and write, under the assignment's row
    lock: the base version, not yet submitted, the payload clean (complete for
    a submit), then the label's next version."""
    _version_check(label, base_version)
    _refuse_if_submitted(assignment)
    status, body = _payload_clean(
        payload=payload, assignment=assignment, complete=kind == RevisionKind.SUBMIT
    )
    return _label_write(
        assignment=assignment,
        label=label,
        annotator=annotator,
        status=status,
        body=body,
        kind=kind,
        active_seconds=active_seconds,
        submission_id=submission_id,
    )


def label_save_draft(
    *,
    annotator,
    assignment_id,
    payload: dict,
    base_version: int,
    active_seconds: int = 0,
) -> Label:
    """Save the physician's work in progress as the label's next version.

    ``base_version`` is the version the client last loaded or saved; a save
    based on any other version (another tab saved first) is refused, so nothing
    is silently overwritten. Concurrent saves are serialized by a row lock on the
    assignment, taken before the label is read.
    """
    with transaction.atomic():
        assignment = _assignment_for_update(
            annotator=annotator, assignment_id=assignment_id
        )
        label = _label_save(
            assignment=assignment,
            label=_label_for_update(assignment),
            annotator=annotator,
            payload=payload,
            base_version=base_version,
            kind=RevisionKind.DRAFT,
            active_seconds=active_seconds,
        )
        if assignment.state == AssignmentState.TODO:
            assignment.state = AssignmentState.DRAFT
            assignment.save(update_fields=["state"])
    return label


def _is_repeat_submit(
    *, assignment: Assignment, label: Label | None, payload, base_version, submission_id
) -> bool:
    """A submit the label already records: same submission id, or the same
    content based on the version just before the submit."""
    if label is None or assignment.state != AssignmentState.SUBMITTED:
        return False
    if submission_id and label.submission_id == submission_id:
        return True
    try:
        same_base = int(base_version) == label.version - 1
    except (TypeError, ValueError):
        return False
    if not same_base:
        return False
    try:
        status, body = _payload_clean(
            payload=payload, assignment=assignment, complete=True
        )
    except ValidationError:
        return False
    return status == label.status and body == label.payload


def label_submit(
    *,
    annotator,
    assignment_id,
    payload: dict,
    base_version: int,
    submission_id: str = "",
    active_seconds: int = 0,
) -> Label:
    """Submit the label after full validation.

    Idempotent: a repeat of a submit already recorded (a double click, a retry
    after a lost response), recognized by its ``submission_id`` or by the same
    content on the same base version, returns the label as it is and writes
    nothing.
    """
    submission_id = str(submission_id or "")[:64]
    with transaction.atomic():
        assignment = _assignment_for_update(
            annotator=annotator, assignment_id=assignment_id
        )
        label = _label_for_update(assignment)
        if _is_repeat_submit(
            assignment=assignment,
            label=label,
            payload=payload,
            base_version=base_version,
            submission_id=submission_id,
        ):
            return label
        label = _label_save(
            assignment=assignment,
            label=label,
            annotator=annotator,
            payload=payload,
            base_version=base_version,
            kind=RevisionKind.SUBMIT,
            active_seconds=active_seconds,
            submission_id=submission_id,
        )
        assignment.state = AssignmentState.SUBMITTED
        assignment.save(update_fields=["state"])
        on_label_submitted(label)
    return label


def label_reopen(*, annotator, assignment_id, base_version: int | None = None) -> Label:
    """Turn the author's submitted label back into a draft, until adjudication of
    the window starts, the window closes, or the co-raters' labels of it can
    otherwise reach the author (annotation.blindness.co_rater_labels_visible).
    Recorded in the history like any save."""
    with transaction.atomic():
        assignment = _assignment_for_update(
            annotator=annotator, assignment_id=assignment_id
        )
        label = _label_for_update(assignment)
        if label is None or assignment.state != AssignmentState.SUBMITTED:
            raise ValidationError("Only a submitted label can be reopened.")
        if base_version is not None:
            _version_check(label, base_version)
        started = CampaignWindow.objects.filter(
            campaign_id=assignment.campaign_id,
            window_id=assignment.window_id,
            adjudication_started_at__isnull=False,
        ).exists()
        if started:
            raise ValidationError(
                "Adjudication of this window has started, so the label can no "
                "longer be reopened."
            )
        where = {
            "campaign_id": assignment.campaign_id,
            "window_id": assignment.window_id,
        }
        if window_is_closed(**where):
            # Closed windows are final: their raters may now compare labels.
            raise ValidationError(
                "This window is closed (every rater agreed, or it was "
                "adjudicated), so the label can no longer be reopened."
            )
        if co_rater_labels_visible(user=annotator, **where):
            raise ValidationError(
                "The other raters' labels of this window are open to you on the "
                "adjudication pages, so your label can no longer be reopened."
            )
        label.submitted_at = None
        label = _label_write(
            assignment=assignment,
            label=label,
            annotator=annotator,
            status=label.status,
            body=label.payload,
            kind=RevisionKind.REOPEN,
            active_seconds=0,
            submission_id="",
        )
        assignment.state = AssignmentState.DRAFT
        assignment.save(update_fields=["state"])
        on_label_reopened(label)
    return label
