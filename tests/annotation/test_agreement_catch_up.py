"""One agreement task catches up with the campaign's other windows whose
agreement is due (issue 20, consensus lag): on the embedded default's
filesystem broker a worker is handed about two messages every 2 s under load,
so the task that runs computes the windows whose own tasks still wait."""

import numpy as np
import pytest

from annotation.models import ConsensusLabel, WindowAgreement
from annotation.selectors.agreement import windows_due_agreement
from annotation.services import label_reopen
from annotation.tasks import window_agreement_task

from .conftest import make_gold_windows
from .helpers import campaign_without_evidence, submit_status_and_problem


class FastModel:
    """Equal texts get equal vectors, different ones orthogonal."""

    def encode(self, texts, **kwargs):
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, sum(map(ord, text)) % 64] = 1.0
        return vectors


@pytest.fixture(autouse=True)
def fast_model(monkeypatch, settings):
    monkeypatch.setattr("evaluation.matcher.load_model", lambda name: FastModel())
    settings.REALICU_AGREEMENT_CATCH_UP = 200  # the filesystem broker's default


@pytest.fixture
def windows(stay):
    return make_gold_windows(stay=stay, count=4)


@pytest.fixture
def campaign(admin_user, physicians, windows):
    return campaign_without_evidence(admin_user, "Catch-up", windows, physicians)


@pytest.mark.django_db
def test_one_task_computes_every_window_whose_agreement_is_due(
    campaign, physicians, windows
):
    a, b = physicians
    for window in windows[:3]:
        submit_status_and_problem(a, campaign, window, "stable", "Septic shock")
        submit_status_and_problem(b, campaign, window, "stable", "Septic shock")
    submit_status_and_problem(
        a, campaign, windows[3], "stable", "Septic shock"
    )  # one of two
    assert windows_due_agreement(campaign=campaign) == [w.pk for w in windows[:3]]

    window_agreement_task(campaign.pk, windows[0].pk)

    assert set(
        ConsensusLabel.objects.filter(campaign=campaign).values_list(
            "window_id", flat=True
        )
    ) == {w.pk for w in windows[:3]}
    assert windows_due_agreement(campaign=campaign) == []


@pytest.mark.django_db
def test_a_label_submitted_again_makes_its_window_due_again(
    campaign, physicians, windows
):
    a, b = physicians
    window, other = windows[0], windows[1]
    submit_status_and_problem(a, campaign, window, "stable", "Septic shock")
    # A disagreement keeps the window open, so the label can be reopened.
    label = submit_status_and_problem(
        b, campaign, window, "deteriorating", "Septic shock"
    )
    window_agreement_task(campaign.pk, window.pk)
    assert windows_due_agreement(campaign=campaign) == []

    label_reopen(annotator=b, assignment_id=label.assignment_id)
    assert windows_due_agreement(campaign=campaign) == []  # not complete
    submit_status_and_problem(b, campaign, window, "stable", "Septic shock")
    assert windows_due_agreement(campaign=campaign) == [window.pk]

    window_agreement_task(campaign.pk, other.pk)  # its labels are not in

    agreement = WindowAgreement.objects.get(campaign=campaign, window=window)
    assert agreement.status_agreed is True
    assert windows_due_agreement(campaign=campaign) == []


@pytest.mark.django_db
def test_no_catch_up_where_it_is_off(campaign, physicians, windows, settings):
    settings.REALICU_AGREEMENT_CATCH_UP = 0  # a server broker's default
    a, b = physicians
    for window in windows[:2]:
        submit_status_and_problem(a, campaign, window, "stable", "Septic shock")
        submit_status_and_problem(b, campaign, window, "stable", "Septic shock")

    window_agreement_task(campaign.pk, windows[0].pk)

    assert windows_due_agreement(campaign=campaign) == [windows[1].pk]
