"""Drafts, submit, reopen, version conflicts, double submits, the append-only
history and time on task."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from annotation.models import (
    AssignmentState,
    Label,
    LabelRevision,
    RevisionKind,
)
from annotation.services import (
    MAX_ACTIVE_SECONDS_PER_SAVE,
    campaign_window_adjudication_start,
    label_reopen,
)

from .helpers import draft_as, submit_as, written_state


def test_first_draft_creates_the_label_at_version_1(physicians, assignment, clinical):
    label = draft_as(
        physicians[0],
        assignment,
        {
            "status": "",
            "acute_problems": [
                {"text": "", "evidence": []},
                {"text": "Shock", "evidence": [clinical["lactate"].pk]},
            ],
        },
        0,
    )

    assert label.version == 1
    assert label.status == ""
    assert label.payload["acute_problems"] == [
        {"text": "", "evidence": []},
        {"text": "Shock", "evidence": [clinical["lactate"].pk]},
    ]
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.DRAFT
    revision = LabelRevision.objects.get(label=label)
    assert (revision.version, revision.kind, revision.author) == (
        1,
        RevisionKind.DRAFT,
        physicians[0],
    )


def test_drafts_survive_and_each_save_increments_the_version(physicians, assignment):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    label = draft_as(physicians[0], assignment, {"status": "improving"}, 1)

    assert label.version == 2
    stored = Label.objects.get(assignment=assignment)
    assert stored.as_payload()["status"] == "improving"
    assert stored.version == 2


def test_submit_validates_and_marks_the_assignment_submitted(
    physicians, assignment, complete_payload
):
    label = submit_as(
        physicians[0], assignment, complete_payload, 0, submission_id="s-1"
    )

    assert label.version == 1
    assert label.status == "deteriorating"
    assert label.submitted_at is not None
    assert label.payload["red_flags"] == complete_payload["red_flags"]
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.SUBMITTED
    assert list(label.revisions.values_list("kind", flat=True)) == [RevisionKind.SUBMIT]


def test_submit_after_drafts(physicians, assignment, complete_payload):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    draft_as(physicians[0], assignment, complete_payload, 1)
    label = submit_as(physicians[0], assignment, complete_payload, 2)
    assert label.version == 3
    assert list(label.revisions.values_list("version", "kind")) == [
        (1, "draft"),
        (2, "draft"),
        (3, "submit"),
    ]


def test_stale_draft_is_refused_with_the_version_and_nothing_is_written(
    physicians, assignment
):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    draft_as(physicians[0], assignment, {"status": "improving"}, 1)  # the other tab
    before = written_state()

    with pytest.raises(ValidationError) as excinfo:
        draft_as(physicians[0], assignment, {"status": "deteriorating"}, 1)

    assert excinfo.value.messages == [
        "This label was changed in another tab or window (version 2); reload to continue."
    ]
    assert excinfo.value.code == "version_conflict"
    assert written_state() == before


def test_first_save_from_a_stale_tab_after_another_tab_saved_is_refused(
    physicians, assignment
):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    before = written_state()
    with pytest.raises(ValidationError, match=r"another tab or window \(version 1\)"):
        draft_as(physicians[0], assignment, {"status": "improving"}, 0)
    assert written_state() == before


def test_stale_submit_is_refused_and_nothing_is_written(
    physicians, assignment, complete_payload
):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    before = written_state()
    with pytest.raises(ValidationError, match=r"another tab or window \(version 1\)"):
        submit_as(physicians[0], assignment, complete_payload, 0)
    assert written_state() == before


def test_double_submit_with_the_same_id_creates_one_label_and_one_revision(
    physicians, assignment, complete_payload
):
    first = submit_as(
        physicians[0], assignment, complete_payload, 0, submission_id="abc"
    )
    before = written_state()
    second = submit_as(
        physicians[0], assignment, complete_payload, 0, submission_id="abc"
    )

    assert second.pk == first.pk and second.version == first.version == 1
    assert written_state() == before
    assert LabelRevision.objects.filter(kind=RevisionKind.SUBMIT).count() == 1


def test_double_submit_without_an_id_is_recognized_by_content_and_version(
    physicians, assignment, complete_payload
):
    first = submit_as(physicians[0], assignment, complete_payload, 0)
    before = written_state()
    second = submit_as(physicians[0], assignment, complete_payload, 0)
    assert second.pk == first.pk
    assert written_state() == before


def test_a_different_submit_after_submission_is_refused(
    physicians, assignment, complete_payload
):
    submit_as(physicians[0], assignment, complete_payload, 0, submission_id="one")
    before = written_state()
    changed = {**complete_payload, "status": "stable"}
    with pytest.raises(ValidationError, match=r"another tab or window \(version 1\)"):
        submit_as(physicians[0], assignment, changed, 0, submission_id="two")
    with pytest.raises(
        ValidationError, match="already submitted; reopen it to change it"
    ):
        submit_as(physicians[0], assignment, changed, 1, submission_id="two")
    with pytest.raises(
        ValidationError, match="already submitted; reopen it to change it"
    ):
        draft_as(physicians[0], assignment, changed, 1)
    assert written_state() == before


def test_reopen_turns_the_label_back_into_a_draft_and_resubmit_works(
    physicians, assignment, complete_payload
):
    submit_as(physicians[0], assignment, complete_payload, 0, submission_id="one")

    label = label_reopen(annotator=physicians[0], assignment_id=assignment.pk)

    assert label.version == 2 and label.submitted_at is None
    assert label.status == "deteriorating"  # the content is kept
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.DRAFT
    # a late replay of the first submit is now stale, not a silent overwrite
    with pytest.raises(ValidationError, match=r"version 2"):
        submit_as(physicians[0], assignment, complete_payload, 0, submission_id="one")
    label = submit_as(
        physicians[0],
        assignment,
        {**complete_payload, "status": "stable"},
        2,
        submission_id="two",
    )
    assert label.version == 3 and label.status == "stable"
    assert list(label.revisions.values_list("kind", flat=True)) == [
        "submit",
        "reopen",
        "submit",
    ]


def test_reopen_is_refused_once_adjudication_started(
    physicians, assignment, complete_payload, admin_user, campaign
):
    submit_as(physicians[0], assignment, complete_payload, 0)
    campaign_window_adjudication_start(
        admin=admin_user, campaign=campaign, window=assignment.window
    )
    before = written_state()
    with pytest.raises(ValidationError) as excinfo:
        label_reopen(annotator=physicians[0], assignment_id=assignment.pk)
    assert excinfo.value.messages == [
        "Adjudication of this window has started, so the label can no longer be reopened."
    ]
    assert written_state() == before


def test_reopen_of_a_draft_is_refused(physicians, assignment):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    before = written_state()
    with pytest.raises(
        ValidationError, match="Only a submitted label can be reopened."
    ):
        label_reopen(annotator=physicians[0], assignment_id=assignment.pk)
    assert written_state() == before


def test_every_save_is_kept_with_author_time_and_content(
    physicians, assignment, complete_payload
):
    start = timezone.now()
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    draft_as(physicians[0], assignment, {"status": "improving"}, 1)
    submit_as(physicians[0], assignment, complete_payload, 2)
    label_reopen(annotator=physicians[0], assignment_id=assignment.pk)

    revisions = list(LabelRevision.objects.filter(label__assignment=assignment))
    assert [(r.version, r.kind) for r in revisions] == [
        (1, "draft"),
        (2, "draft"),
        (3, "submit"),
        (4, "reopen"),
    ]
    assert all(r.author == physicians[0] and r.saved_at >= start for r in revisions)
    assert [r.payload["status"] for r in revisions] == [
        "stable",
        "improving",
        "deteriorating",
        "deteriorating",
    ]


def test_history_cannot_be_changed_or_deleted(physicians, assignment):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0)
    revision = LabelRevision.objects.get()

    revision.payload = {"status": "improving"}
    with pytest.raises(ValidationError, match="append-only"):
        revision.save()
    with pytest.raises(ValidationError, match="append-only"):
        revision.delete()
    with pytest.raises(ValidationError, match="append-only"):
        LabelRevision.objects.filter(pk=revision.pk).update(kind="submit")
    with pytest.raises(ValidationError, match="append-only"):
        LabelRevision.objects.all().delete()
    if connection.vendor == "postgresql":
        # the database refuses too, whatever code runs
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("UPDATE annotation_labelrevision SET kind = 'submit'")
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("DELETE FROM annotation_labelrevision")
    assert LabelRevision.objects.get().payload == {
        "status": "stable",
        "status_evidence": [],
        "acute_problems": [],
        "added_actions": [],
        "red_flags": [],
        "action_ratings": [],
    }


def _age_label(assignment, seconds):
    Label.objects.filter(assignment=assignment).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_time_on_task_accumulates_client_active_seconds(
    physicians, assignment, complete_payload
):
    draft_as(physicians[0], assignment, {"status": "stable"}, 0, active_seconds=20)
    _age_label(assignment, 60)
    draft_as(physicians[0], assignment, {"status": "improving"}, 1, active_seconds=30)
    _age_label(assignment, 60)
    label = submit_as(physicians[0], assignment, complete_payload, 2, active_seconds=15)

    assert label.time_on_task_seconds == 65
    assert list(label.revisions.values_list("time_on_task_seconds", flat=True)) == [
        20,
        50,
        65,
    ]


def test_time_on_task_is_bounded(physicians, assignment):
    label = draft_as(physicians[0], assignment, {}, 0, active_seconds=10**6)
    assert label.time_on_task_seconds == MAX_ACTIVE_SECONDS_PER_SAVE
    # a save right after the previous one cannot claim more than the time between
    label = draft_as(physicians[0], assignment, {}, 1, active_seconds=500)
    assert label.time_on_task_seconds <= MAX_ACTIVE_SECONDS_PER_SAVE + 6
    label = draft_as(physicians[0], assignment, {}, 2, active_seconds=-50)
    label2 = draft_as(physicians[0], assignment, {}, 3, active_seconds="junk")
    assert label2.time_on_task_seconds == label.time_on_task_seconds
