"""Helpers of the annotation tests: a campaign whose items need no evidence, a
physician's draft and submit of an assignment, a plain label submission, an
admin's accepts, and the state a refused write must leave alone."""

from annotation.models import Assignment, Label, LabelRevision
from annotation.services import (
    adjudication_decide,
    campaign_create,
    label_save_draft,
    label_submit,
)


def campaign_without_evidence(admin, name, windows, physicians, **fields):
    """A campaign (``fields`` as campaign_create's) whose items need not cite
    evidence: for tests of agreement, consensus or blindness, not of citing."""
    return campaign_create(
        admin=admin,
        name=name,
        windows=windows,
        physicians=physicians,
        evidence_required=False,
        **fields,
    )


def draft_as(physician, assignment, payload, version=0, **more):
    """``physician`` saves ``payload`` as a draft of ``assignment``, on top of
    label ``version`` (0: none yet)."""
    return label_save_draft(
        annotator=physician,
        assignment_id=assignment.pk,
        payload=payload,
        base_version=version,
        **more,
    )


def submit_as(physician, assignment, payload, version=0, **more):
    """``physician`` submits ``payload`` on ``assignment``, on top of label
    ``version`` (0: none yet)."""
    return label_submit(
        annotator=physician,
        assignment_id=assignment.pk,
        payload=payload,
        base_version=version,
        **more,
    )


def written_state() -> tuple:
    """Everything a label write could change, to show that a refused one did not."""
    return (
        Label.objects.count(),
        LabelRevision.objects.count(),
        sorted(
            Label.objects.values_list(
                "id", "version", "status", "payload", "time_on_task_seconds"
            )
        ),
        sorted(Assignment.objects.values_list("id", "state", "active", "annotator_id")),
    )


def submit_status_and_problem(physician, campaign, window, status, problem):
    """The physician's label of ``window``: ``status`` and one acute problem,
    nothing cited, nothing else (a new revision of a label already there)."""
    assignment = Assignment.objects.get(
        campaign=campaign, window=window, annotator=physician, active=True
    )
    label = getattr(assignment, "label", None)
    return label_submit(
        annotator=physician,
        assignment_id=assignment.pk,
        payload={
            "status": status,
            "status_evidence": [],
            "acute_problems": [{"text": problem, "evidence": []}],
            "action_ratings": [],
            "added_actions": [],
            "red_flags": [],
        },
        base_version=label.version if label is not None else 0,
    )


def accept_items(admin, campaign, window, item_refs, reason, task="acute_problems"):
    """``admin`` accepts each of ``item_refs`` of ``task`` as it stands, one
    decision each, with ``reason``."""
    for item_ref in item_refs:
        adjudication_decide(
            admin=admin,
            campaign=campaign,
            window=window,
            task=task,
            item_ref=item_ref,
            action="accept",
            reason=reason,
        )
