"""The consensus tests' data, shared by the agreement, adjudication,
calibration, IRR and Oracle validation tests: a 48-hour stay (``stay``, a
fixture a module takes with ``from tests.annotation.consensus_data import
stay``: the Gold campaign of tests/annotation/conftest.py then has its four
windows there), a physician's label written in a few words (``submit``), a
window's consensus (``consensus_of``) and an admin's decision on it
(``decide``)."""

import pytest

from annotation.models import Assignment, ConsensusLabel
from annotation.selectors.labelling import recorded_critical_actions
from annotation.services import adjudication_decide
from tests.factories import make_admission, make_stay

from .helpers import submit_as

PROBLEMS = "acute_problems"
ACTIONS = "recommended_actions"
FLAGS = "red_flags"


@pytest.fixture
def stay(db):
    return make_stay(admission=make_admission(), hours=48)


def submit(
    physician,
    campaign,
    window,
    status,
    problems=(),
    flags=(),
    added=(),
    ratings=None,
    status_evidence=(),
):
    """Submit the physician's label; items are ``text`` or ``(text, evidence)``;
    every recorded critical action is rated acceptable unless ``ratings``
    ({event id: rating}) says otherwise."""
    assignment = Assignment.objects.get(
        campaign=campaign, window=window, annotator=physician, active=True
    )

    def items(values):
        return [
            {"text": v, "evidence": []}
            if isinstance(v, str)
            else {"text": v[0], "evidence": list(v[1])}
            for v in values
        ]

    ratings = ratings or {}
    payload = {
        "status": status,
        "status_evidence": list(status_evidence),
        "acute_problems": items(problems),
        "action_ratings": [
            {
                "event_id": e.pk,
                "rating": ratings.get(e.pk, "acceptable"),
                "evidence": [],
            }
            for e in recorded_critical_actions(assignment=assignment)
        ],
        "added_actions": items(added),
        "red_flags": items(flags),
    }
    return submit_as(physician, assignment, payload)


def consensus_of(campaign, window) -> ConsensusLabel:
    return ConsensusLabel.objects.get(campaign=campaign, window=window)


def decide(campaign, admin, window, task, action, *, item_ref="", reason="r", **more):
    """``adjudication_decide`` with the consensus tests' usual item ref and
    reason."""
    return adjudication_decide(
        admin=admin,
        campaign=campaign,
        window=window,
        task=task,
        item_ref=item_ref,
        action=action,
        reason=reason,
        **more,
    )
