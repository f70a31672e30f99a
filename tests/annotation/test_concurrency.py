"""Concurrent saves of one label on PostgreSQL: the row lock serializes them, so
exactly one save of a version wins and the other is refused, never both written."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from annotation.models import Label, LabelRevision, RevisionKind
from annotation.services import label_save_draft, label_submit

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row locks need PostgreSQL"
)


def _race(calls):
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except Exception as error:  # noqa: BLE001 - the outcome is the result
            results[i] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


@pytest.mark.django_db(transaction=True)
def test_two_tabs_saving_the_same_version_at_once_one_wins(physicians, assignment):
    calls = [
        lambda status=status: label_save_draft(
            annotator=physicians[0],
            assignment_id=assignment.pk,
            payload={"status": status},
            base_version=0,
        )
        for status in ("stable", "improving", "deteriorating", "stable")
    ]
    results = _race(calls)

    saved = [r for r in results if isinstance(r, Label)]
    refused = [r for r in results if isinstance(r, ValidationError)]
    assert len(saved) == 1 and len(refused) == 3, results
    assert all("another tab or window (version 1)" in r.messages[0] for r in refused)
    assert Label.objects.get().version == 1
    assert LabelRevision.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_double_click_on_submit_at_once_writes_one_submit(
    physicians, assignment, complete_payload
):
    calls = [
        lambda: label_submit(
            annotator=physicians[0],
            assignment_id=assignment.pk,
            payload=complete_payload,
            base_version=0,
            submission_id="click",
        )
        for _ in range(4)
    ]
    results = _race(calls)

    assert all(isinstance(r, Label) for r in results), results
    assert {r.pk for r in results} == {Label.objects.get().pk}
    assert LabelRevision.objects.filter(kind=RevisionKind.SUBMIT).count() == 1
