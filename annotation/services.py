"""Writes of the annotation app: campaigns and their assignments, and physicians'
labels (drafts, submits, reopens), each save kept in the label's history."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from annotation.assigning import balanced_rater_sets
from annotation.critical import (
    critical_action_rules_clean,
    default_critical_action_rules,
)
from annotation.models import (
    ActionRating,
    Assignment,
    AssignmentState,
    Campaign,
    CampaignKind,
    CampaignPhysician,
    CampaignWindow,
    Label,
    LabelRevision,
    PatientStatus,
    RevisionKind,
)
from annotation.roles import user_is_admin, user_is_physician
from annotation.selectors import recorded_critical_actions
from windows.models import Event, Window

MAX_ITEM_CHARS = 300
MAX_ITEMS_PER_LIST = 50
MAX_EVIDENCE_PER_ITEM = 100
# Time on task: the client sends the seconds it saw the physician active since
# its last successful save; a save counts at most this many, and never more than
# the time since the label's previous save.
MAX_ACTIVE_SECONDS_PER_SAVE = 600
ACTIVE_SECONDS_SLACK = 5

# Free-text lists of a label and how one item is named in messages.
TEXT_LISTS = {
    "acute_problems": "Acute problem",
    "added_actions": "Added action",
    "red_flags": "Red flag",
}


# Roles ------------------------------------------------------------------------


def _require_admin(user, what: str) -> None:
    if not user_is_admin(user):
        raise PermissionDenied(f"Only an admin can {what}.")


def _require_physician(user) -> None:
    if not user_is_physician(user):
        raise PermissionDenied(
            "Only physicians label windows, and your account has no physician role."
        )


# Campaigns and assignments ----------------------------------------------------


def _windows_resolve(windows: Iterable) -> list[Window]:
    ids = [w.pk if isinstance(w, Window) else w for w in windows]
    try:
        ids = list(dict.fromkeys(int(pk) for pk in ids))
    except (TypeError, ValueError):
        raise ValidationError("Windows must be given as windows or window ids.")
    if not ids:
        raise ValidationError("Choose at least one window for the campaign.")
    found = list(
        Window.objects.filter(pk__in=ids)
        .select_related("stay")
        .order_by("stay_id", "index")
    )
    if len(found) != len(ids):
        missing = sorted(set(ids) - {w.pk for w in found})
        raise ValidationError(
            f"{len(missing)} of the chosen windows do not exist "
            f"(ids {', '.join(map(str, missing[:5]))})."
        )
    not_gold = [w for w in found if not w.sampled_gold]
    if not_gold:
        raise ValidationError(
            f"Only sampled Gold windows can be labelled in a Gold campaign; "
            f"{len(not_gold)} of the chosen windows are not (first: {not_gold[0]})."
        )
    return found


def _physicians_resolve(physicians: Iterable) -> list:
    users = list({u.pk: u for u in physicians}.values())
    not_physicians = [u for u in users if not user_is_physician(u)]
    if not_physicians:
        names = ", ".join(u.get_username() for u in not_physicians)
        raise ValidationError(
            f"Only physicians can be assigned windows; {names} "
            f"{'has' if len(not_physicians) == 1 else 'have'} no physician role."
        )
    return sorted(users, key=lambda u: u.pk)


@transaction.atomic
def campaign_create(
    *,
    admin,
    name: str,
    windows: Iterable,
    physicians: Iterable,
    annotators_per_window: int = 2,
    critical_action_categories: list[dict] | None = None,
) -> Campaign:
    """Create a Gold campaign and assign its windows.

    Windows are taken in stay order, so a stay's windows sit together in the
    queues; rater sets come from ``balanced_rater_sets`` (loads within one, pairs
    of physicians sharing windows). Physicians are indexed by id, so the same
    inputs give the same assignments.
    """
    _require_admin(admin, "create a campaign")
    name = (name or "").strip()
    if not name:
        raise ValidationError("Give the campaign a name.")
    if Campaign.objects.filter(name=name).exists():
        raise ValidationError(f'A campaign named "{name}" already exists.')
    window_list = _windows_resolve(windows)
    users = _physicians_resolve(physicians)
    if not isinstance(annotators_per_window, int) or annotators_per_window < 1:
        raise ValidationError(
            "Annotators per window must be a whole number of 1 or more."
        )
    if len(users) < annotators_per_window:
        raise ValidationError(
            f"{annotators_per_window} annotators per window need at least "
            f"{annotators_per_window} physicians; {len(users)} chosen."
        )
    rules = critical_action_rules_clean(
        default_critical_action_rules()
        if critical_action_categories is None
        else critical_action_categories
    )
    campaign = Campaign.objects.create(
        name=name,
        kind=CampaignKind.GOLD,
        created_by=admin,
        annotators_per_window=annotators_per_window,
        critical_action_categories=rules,
    )
    CampaignPhysician.objects.bulk_create(
        CampaignPhysician(campaign=campaign, user=u) for u in users
    )
    CampaignWindow.objects.bulk_create(
        CampaignWindow(campaign=campaign, window=w) for w in window_list
    )
    rater_sets = balanced_rater_sets(
        physicians=len(users),
        windows=len(window_list),
        per_window=annotators_per_window,
    )
    Assignment.objects.bulk_create(
        Assignment(
            campaign=campaign, window=window, annotator=users[i], assigned_by=admin
        )
        for window, raters in zip(window_list, rater_sets, strict=True)
        for i in raters
    )
    return campaign


@transaction.atomic
def campaign_critical_categories_set(
    *, admin, campaign: Campaign, rules: list[dict]
) -> Campaign:
    """Change which recorded actions are shown for rating. Labels already
    submitted keep their ratings; new submits are checked against the new rules."""
    _require_admin(admin, "change the critical action categories")
    campaign.critical_action_categories = critical_action_rules_clean(rules)
    campaign.save(update_fields=["critical_action_categories"])
    return campaign


def _campaign_window_get(*, campaign: Campaign, window: Window) -> CampaignWindow:
    campaign_window = CampaignWindow.objects.filter(
        campaign=campaign, window=window
    ).first()
    if campaign_window is None:
        raise ValidationError(f"{window} is not part of the campaign {campaign}.")
    return campaign_window


@transaction.atomic
def assignment_add(
    *, admin, window: Window, campaign: Campaign, physician
) -> Assignment:
    """Give a window of the campaign to one more physician (e.g. a third rater on
    disagreement)."""
    _require_admin(admin, "assign windows")
    _campaign_window_get(campaign=campaign, window=window)
    (user,) = _physicians_resolve([physician])
    existing = (
        Assignment.objects.select_for_update()
        .filter(campaign=campaign, window=window, annotator=user)
        .first()
    )
    if existing is not None and existing.active:
        raise ValidationError(
            f"{user.get_username()} is already assigned {window} in this campaign."
        )
    CampaignPhysician.objects.get_or_create(campaign=campaign, user=user)
    if existing is not None:
        # Taken from this physician earlier: give it back, with their work on it.
        existing.active = True
        existing.deactivated_at = None
        existing.assigned_by = admin
        existing.save(update_fields=["active", "deactivated_at", "assigned_by"])
        return existing
    return Assignment.objects.create(
        campaign=campaign, window=window, annotator=user, assigned_by=admin
    )


@transaction.atomic
def assignment_reassign(*, admin, assignment: Assignment, physician) -> Assignment:
    """Move an abandoned window to another physician. The old assignment stays,
    inactive, with whatever draft it had; the new one starts empty (blindness)
    and points back to it."""
    _require_admin(admin, "reassign windows")
    (user,) = _physicians_resolve([physician])
    old = Assignment.objects.select_for_update().get(pk=assignment.pk)
    if not old.active:
        raise ValidationError("This assignment was already reassigned.")
    if old.state == AssignmentState.SUBMITTED:
        raise ValidationError(
            "This window's label is already submitted; add another physician "
            "to the window instead of reassigning it."
        )
    if old.annotator_id == user.pk:
        raise ValidationError(
            f"The window is already assigned to {user.get_username()}."
        )
    taken = Assignment.objects.filter(
        campaign_id=old.campaign_id, window_id=old.window_id, annotator=user
    ).first()
    if taken is not None and taken.active:
        raise ValidationError(
            f"{user.get_username()} is already assigned this window in this campaign."
        )
    if taken is not None:
        raise ValidationError(
            f"This window was taken from {user.get_username()} before; add them "
            "back to it instead."
        )
    old.active = False
    old.deactivated_at = timezone.now()
    old.save(update_fields=["active", "deactivated_at"])
    CampaignPhysician.objects.get_or_create(campaign_id=old.campaign_id, user=user)
    return Assignment.objects.create(
        campaign_id=old.campaign_id,
        window_id=old.window_id,
        annotator=user,
        assigned_by=admin,
        reassigned_from=old,
    )


@transaction.atomic
def campaign_window_adjudication_start(
    *, admin, campaign: Campaign, window: Window
) -> CampaignWindow:
    """Mark that adjudication of the window has started: from now on its authors
    can no longer reopen their labels. Idempotent."""
    _require_admin(admin, "adjudicate")
    campaign_window = _campaign_window_get(campaign=campaign, window=window)
    if campaign_window.adjudication_started_at is None:
        campaign_window.adjudication_started_at = timezone.now()
        campaign_window.save(update_fields=["adjudication_started_at"])
    return campaign_window


# Labels -----------------------------------------------------------------------


def _assignment_for_update(*, annotator, assignment_id) -> Assignment:
    """The annotator's assignment, locked for the rest of the transaction. Any
    id that is not theirs is a 404, whether it exists or not."""
    _require_physician(annotator)
    try:
        pk = int(assignment_id)
    except (TypeError, ValueError):
        raise Http404("No such assignment.")
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
            )
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


def _event_ids(value, *, where: str, errors: list[str]) -> list[int]:
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        errors.append(f"{where}: evidence must be a list of events.")
        return []
    ids = []
    for item in value:
        if isinstance(item, bool):
            errors.append(f"{where}: evidence must be events, not {item!r}.")
            continue
        try:
            ids.append(int(item))
        except (TypeError, ValueError):
            errors.append(f"{where}: evidence must be events, not {item!r}.")
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_EVIDENCE_PER_ITEM:
        errors.append(
            f"{where} has {len(ids)} pieces of evidence; the limit is "
            f"{MAX_EVIDENCE_PER_ITEM}."
        )
    return ids


def _payload_clean(
    *,
    payload,
    assignment: Assignment,
    complete: bool,
) -> tuple[str, dict]:
    """The label's status and payload in canonical form, or a ValidationError
    whose messages, by field, say what to fix.

    A draft (``complete=False``) may be unfinished: no status, empty items,
    unrated actions. Whatever it holds must still fit: items of at most
    MAX_ITEM_CHARS characters, evidence from the window's admission. A submit
    also needs the status, no empty item, and a valid rating of every recorded
    critical action of the window and of nothing else.
    """
    if not isinstance(payload, dict):
        raise ValidationError("The label could not be read; reload to continue.")
    errors: dict[str, list[str]] = {}
    # Evidence ids per field, checked against the admission in one query below.
    cited: dict[str, list[int]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    status = payload.get("status") or ""
    if not isinstance(status, str) or (status and status not in PatientStatus.values):
        add("status", "Patient status must be improving, stable or deteriorating.")
        status = ""
    elif complete and not status:
        add("status", "Choose the patient status: improving, stable or deteriorating.")
    field_errors: list[str] = []
    status_evidence = _event_ids(
        payload.get("status_evidence"), where="Patient status", errors=field_errors
    )
    for message in field_errors:
        add("status_evidence", message)
    cited["status_evidence"] = status_evidence
    body: dict = {"status_evidence": status_evidence}

    def items_of(field: str) -> list:
        value = payload.get(field)
        if value in (None, ""):
            return []
        if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
            add(field, f"{field.replace('_', ' ').capitalize()} could not be read.")
            return []
        if len(value) > MAX_ITEMS_PER_LIST:
            add(
                field,
                f"{field.replace('_', ' ').capitalize()} has {len(value)} items; "
                f"the limit is {MAX_ITEMS_PER_LIST}.",
            )
            return []
        return value

    for field, noun in TEXT_LISTS.items():
        cleaned = []
        cited[field] = []
        for n, item in enumerate(items_of(field), start=1):
            where = f"{noun} {n}"
            text = item.get("text", "")
            if not isinstance(text, str):
                add(field, f"{where} must be text.")
                text = ""
            text = text.strip()
            if complete and not text:
                add(field, f"{where} is empty: write it or remove it.")
            if len(text) > MAX_ITEM_CHARS:
                add(
                    field,
                    f"{where} is {len(text)} characters long; the limit is "
                    f"{MAX_ITEM_CHARS}.",
                )
            field_errors = []
            evidence = _event_ids(
                item.get("evidence"), where=where, errors=field_errors
            )
            for message in field_errors:
                add(field, message)
            cited[field] += evidence
            cleaned.append({"text": text, "evidence": evidence})
        body[field] = cleaned

    ratings = []
    rated: set[int] = set()
    cited["action_ratings"] = []
    for n, item in enumerate(items_of("action_ratings"), start=1):
        where = f"Rated action {n}"
        try:
            event_id = int(item.get("event_id"))
        except (TypeError, ValueError):
            add("action_ratings", f"{where} does not name a recorded action.")
            continue
        if event_id in rated:
            add("action_ratings", f"{where} rates the same action twice.")
            continue
        rated.add(event_id)
        rating = item.get("rating") or ""
        if not isinstance(rating, str) or (
            rating and rating not in ActionRating.values
        ):
            add(
                "action_ratings",
                f"{where}: the rating must be best practice, acceptable or "
                "potentially harmful.",
            )
            rating = ""
        elif complete and not rating:
            add(
                "action_ratings",
                f"{where} is not rated: best practice, acceptable or potentially "
                "harmful.",
            )
        field_errors = []
        evidence = _event_ids(item.get("evidence"), where=where, errors=field_errors)
        for message in field_errors:
            add("action_ratings", message)
        cited["action_ratings"] += [event_id, *evidence]
        ratings.append({"event_id": event_id, "rating": rating, "evidence": evidence})
    body["action_ratings"] = ratings

    window = assignment.window
    all_cited = {pk for ids in cited.values() for pk in ids}
    if all_cited:
        known = set(
            Event.objects.filter(
                admission_id=window.stay.admission_id, pk__in=all_cited
            ).values_list("pk", flat=True)
        )
        for field, ids in cited.items():
            foreign = [pk for pk in dict.fromkeys(ids) if pk not in known]
            if foreign:
                add(
                    field,
                    "Evidence must come from this patient's stay; "
                    f"event{'s' if len(foreign) > 1 else ''} "
                    f"{', '.join(map(str, foreign[:5]))} "
                    f"{'do' if len(foreign) > 1 else 'does'} not belong to it.",
                )

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
    return status, body


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
        label = _label_for_update(assignment)
        _version_check(label, base_version)
        _refuse_if_submitted(assignment)
        status, body = _payload_clean(
            payload=payload, assignment=assignment, complete=False
        )
        label = _label_write(
            assignment=assignment,
            label=label,
            annotator=annotator,
            status=status,
            body=body,
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
        _version_check(label, base_version)
        _refuse_if_submitted(assignment)
        status, body = _payload_clean(
            payload=payload, assignment=assignment, complete=True
        )
        label = _label_write(
            assignment=assignment,
            label=label,
            annotator=annotator,
            status=status,
            body=body,
            kind=RevisionKind.SUBMIT,
            active_seconds=active_seconds,
            submission_id=submission_id,
        )
        assignment.state = AssignmentState.SUBMITTED
        assignment.save(update_fields=["state"])
        # Imported here: consensus builds on these services.
        from annotation.consensus import on_label_submitted

        on_label_submitted(label)
    return label


def label_reopen(*, annotator, assignment_id, base_version: int | None = None) -> Label:
    """Turn the author's submitted label back into a draft, until adjudication of
    the window starts. Recorded in the history like any save."""
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
        from annotation.consensus import on_label_reopened

        on_label_reopened(label)
    return label


__all__ = [
    "MAX_ITEM_CHARS",
    "assignment_add",
    "assignment_reassign",
    "campaign_create",
    "campaign_critical_categories_set",
    "campaign_window_adjudication_start",
    "label_reopen",
    "label_save_draft",
    "label_submit",
]
