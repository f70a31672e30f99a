"""Fixtures of the annotation tests: users by role, a stay with Gold windows and
events in its first window, a campaign of two physicians over them, the first
physician's label submitted, and the adjudication tests' hand-built window;
the consensus tests' configured matcher (loaded once a module), four Gold
windows, a Gold campaign over them whose items need no evidence, and the
campaign labelled by two physicians with its consensus computed (``labelled``),
on the 48-hour stay of consensus_data.py where a module takes that ``stay``."""

import os
from datetime import timedelta

import pytest

from accounts.roles import Role, roles_ensure
from annotation.services import campaign_create, window_consensus_refresh
from tests.factories import drip, lab, make_admission, make_event, make_stay, make_user
from windows.models import Domain, EventKind, Window
from windows.windowing import windows_build

from .consensus_data import submit
from .helpers import campaign_without_evidence, submit_as


def make_role_user(role: str, **fields):
    groups = roles_ensure()
    user = make_user(staff=role == Role.ADMIN, **fields)
    user.groups.add(groups[role])
    return user


def make_gold_windows(*, stay, count: int | None = None) -> list[Window]:
    windows = windows_build(stay=stay)
    chosen = windows if count is None else windows[:count]
    Window.objects.filter(pk__in=[w.pk for w in chosen]).update(sampled_gold=True)
    return list(Window.objects.filter(pk__in=[w.pk for w in chosen]).order_by("index"))


def make_gold_stays(*, stays: int, hours: float = 6) -> list[list[Window]]:
    """``stays`` stays whose every window (30 min, every 30 min) is Gold:
    ``2 * hours`` windows each."""
    out = []
    for _ in range(stays):
        stay = make_stay(admission=make_admission(), hours=hours)
        windows = windows_build(stay=stay, window_minutes=30, stride_hours=0.5)
        Window.objects.filter(stay=stay).update(sampled_gold=True)
        out.append(windows)
    return out


@pytest.fixture
def physicians(db):
    return [make_role_user(Role.PHYSICIAN) for _ in range(2)]


@pytest.fixture
def stay(db):
    return make_stay(admission=make_admission(), hours=12)


@pytest.fixture
def clinical(stay):
    """Events of the stay's admission: in window 0 a norepinephrine start
    (critical), an insulin dose (routine) and a heart rate; a lactate before the
    window; and an event of another admission."""
    admission = stay.admission
    t0 = stay.intime
    norepinephrine = drip(stay, "norepinephrine", 0.1, 5 / 60, text="")
    intubation = make_event(
        admission=admission,
        time=t0 + timedelta(minutes=10),
        kind=EventKind.ACTION,
        domain=Domain.RESPIRATORY,
        category="IMV",
        name="Ventilator",
        value_num=None,
        unit="",
        source_table="respiratory_support",
    )
    insulin = make_event(
        admission=admission,
        time=t0 + timedelta(minutes=15),
        kind=EventKind.ACTION,
        domain=Domain.MED_INTERMITTENT,
        category="insulin",
        name="Insulin",
        value_num=4,
        unit="units",
        source_table="medication_admin_intermittent",
    )
    heart_rate = make_event(admission=admission, time=t0 + timedelta(minutes=20))
    lactate = lab(stay, "lactate", 4.2, -2, unit="mmol/L", name="Lactate")
    other_stay = make_stay(admission=make_admission(), hours=12)
    foreign = make_event(admission=other_stay.admission, time=other_stay.intime)
    return {
        "norepinephrine": norepinephrine,
        "intubation": intubation,
        "insulin": insulin,
        "heart_rate": heart_rate,
        "lactate": lactate,
        "foreign": foreign,
    }


@pytest.fixture
def gold_windows(stay, clinical):
    return make_gold_windows(stay=stay, count=3)


@pytest.fixture
def campaign(admin_user, physicians, gold_windows):
    return campaign_create(
        admin=admin_user, name="Gold 1", windows=gold_windows, physicians=physicians
    )


@pytest.fixture
def assignment(campaign, physicians, gold_windows):
    """The first physician's assignment of window 0 (which holds the events)."""
    return campaign.assignments.get(annotator=physicians[0], window=gold_windows[0])


@pytest.fixture
def built(admin_user, physicians, stay, clinical):
    """The hand-built window of the adjudication tests (workspace_data.py):
    (campaign, window), its labels submitted and its consensus built."""
    from .workspace_data import hand_built_window  # it imports this module

    return hand_built_window(
        admin=admin_user, physicians=physicians, stay=stay, clinical=clinical
    )


@pytest.fixture
def submitted(physicians, assignment, complete_payload):
    """The first physician's label of window 0, submitted: ``complete_payload``."""
    return submit_as(physicians[0], assignment, complete_payload)


@pytest.fixture
def complete_payload(clinical):
    c = clinical
    return {
        "status": "deteriorating",
        "status_evidence": [c["lactate"].pk],
        "acute_problems": [
            {
                "text": "Septic shock",
                "evidence": [c["lactate"].pk, c["norepinephrine"].pk],
            },
            {"text": "Respiratory failure", "evidence": [c["intubation"].pk]},
        ],
        "action_ratings": [
            {
                "event_id": c["norepinephrine"].pk,
                "rating": "best_practice",
                "evidence": [],
            },
            {
                "event_id": c["intubation"].pk,
                "rating": "acceptable",
                "evidence": [c["heart_rate"].pk],
            },
        ],
        "added_actions": [{"text": "Blood cultures", "evidence": [c["lactate"].pk]}],
        "red_flags": [
            {"text": "Avoid fluid overload", "evidence": [c["norepinephrine"].pk]}
        ],
    }


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
def windows(stay, clinical):
    return make_gold_windows(stay=stay, count=4)


@pytest.fixture
def gold(admin_user, physicians, windows):
    # Consensus, not citing, is under test: items here carry no evidence.
    return campaign_without_evidence(admin_user, "Gold IRR", windows, physicians)


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
