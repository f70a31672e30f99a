"""Fixtures of the annotation tests: users by role, a stay with Gold windows and
events in its first window, a campaign of two physicians over them, the first
physician's label submitted, and the adjudication tests' hand-built window."""

from datetime import timedelta

import pytest

from accounts.roles import Role, roles_ensure
from annotation.services import campaign_create
from tests.factories import drip, lab, make_admission, make_event, make_stay, make_user
from windows.models import Domain, EventKind, Window
from windows.windowing import windows_build

from .helpers import submit_as


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
