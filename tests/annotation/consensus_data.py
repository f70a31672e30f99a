"""The labelled Gold campaign of the consensus tests, shared by the agreement,
adjudication, calibration, IRR and Oracle validation tests: the configured
matcher (loaded once a module), a 48-hour stay with four Gold windows, a Gold
campaign over them whose items need no evidence, a physician's label written
in a few words (``submit``), and the campaign labelled by two physicians with
its consensus computed (``labelled``); then a window's consensus
(``consensus_of``) and an admin's decision on it (``decide``). Fixtures: a
module takes them with ``from tests.annotation.consensus_data import ...``."""

import os

import pytest

from annotation.models import Assignment, ConsensusLabel
from annotation.selectors.labelling import recorded_critical_actions
from annotation.services import adjudication_decide, window_consensus_refresh
from tests.factories import make_admission, make_stay

from .conftest import make_gold_windows
from .helpers import campaign_without_evidence, submit_as

PROBLEMS = "acute_problems"
ACTIONS = "recommended_actions"
FLAGS = "red_flags"


@pytest.fixture(scope="module")
def matcher(django_db_blocker):
    """The configured matcher, loaded once for the module (loading takes
    seconds); its in-memory embeddings carry over between tests."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from evaluation.matcher import matcher_for_settings

    with django_db_blocker.unblock():
        m = matcher_for_settings(tau=0.5)
        m.load()
    return m


@pytest.fixture
def stay(db):
    return make_stay(admission=make_admission(), hours=48)


@pytest.fixture
def windows(stay, clinical):
    return make_gold_windows(stay=stay, count=4)


@pytest.fixture
def gold(admin_user, physicians, windows):
    # Consensus, not citing, is under test: items here carry no evidence.
    return campaign_without_evidence(admin_user, "Gold IRR", windows, physicians)


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


@pytest.fixture
def labelled(gold, physicians, windows, clinical, matcher):
    """Four windows labelled by two physicians (the first always first):

    - w0: both deteriorating; problems 'Septic shock' (lactate) + 'Respiratory
      failure' vs 'Shock due to sepsis' (norepinephrine); both rate
      norepinephrine best practice, the ventilator acceptable vs potentially
      harmful; added 'Blood cultures' vs 'Obtain blood cultures'; red flags
      'Avoid fluid overload' vs 'Avoid excessive fluids'.
    - w1: both stable; 'Delirium' both; red flag 'Avoid nephrotoxic drugs' vs none.
    - w2: both improving, nothing else.
    - w3: stable vs deteriorating; 'Hypokalemia' vs nothing.
    """
    a, b = physicians
    c = clinical
    w0, w1, w2, w3 = windows
    ne, vent = c["norepinephrine"].pk, c["intubation"].pk
    submit(
        a,
        gold,
        w0,
        "deteriorating",
        problems=[("Septic shock", [c["lactate"].pk]), "Respiratory failure"],
        added=["Blood cultures"],
        flags=["Avoid fluid overload"],
        ratings={ne: "best_practice", vent: "acceptable"},
    )
    submit(
        b,
        gold,
        w0,
        "deteriorating",
        problems=[("Shock due to sepsis", [ne])],
        added=["Obtain blood cultures"],
        flags=["Avoid excessive fluids"],
        ratings={ne: "best_practice", vent: "potentially_harmful"},
    )
    submit(
        a, gold, w1, "stable", problems=["Delirium"], flags=["Avoid nephrotoxic drugs"]
    )
    submit(b, gold, w1, "stable", problems=["Delirium"])
    submit(a, gold, w2, "improving")
    submit(b, gold, w2, "improving")
    submit(a, gold, w3, "stable", problems=["Hypokalemia"])
    submit(b, gold, w3, "deteriorating")
    for window in windows:
        window_consensus_refresh(campaign=gold, window=window, matcher=matcher)
    return gold


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
