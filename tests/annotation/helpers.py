"""Assertion helpers of the annotation tests."""

from annotation.models import Assignment, Label, LabelRevision


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
