"""Fixtures of the exports tests: users by role, release folders under the
test's tmp dir, and a tiny Scale release whose metrics are computed by hand."""

from datetime import timedelta

import pytest

from accounts.roles import Role
from exports.building import release_build
from exports.models import ReleaseKind
from exports.services import release_create
from tests.annotation.conftest import make_role_user
from tests.factories import make_admission, make_event, make_stay
from windows.models import DiseaseGroup, Domain, EventKind
from windows.windowing import windows_build

from .helpers import make_oracle_run, oracle_payload


@pytest.fixture(autouse=True)
def release_dirs(settings, tmp_path):
    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    settings.REALICU_SUBMISSIONS_DIR = tmp_path / "submissions"
    return settings.REALICU_RELEASES_DIR


@pytest.fixture
def physician(db):
    return make_role_user(Role.PHYSICIAN)


@pytest.fixture
def tiny_stays(db):
    """Stay A (4 h: windows at 0 h and 2 h, sepsis) with events, stay B (2 h:
    one window, neurological), stay C (2 h: one window, sepsis)."""
    a = make_stay(
        admission=make_admission(), hours=4, disease_group=DiseaseGroup.SEPSIS
    )
    b = make_stay(
        admission=make_admission(), hours=2, disease_group=DiseaseGroup.NEUROLOGICAL
    )
    c = make_stay(
        admission=make_admission(), hours=2, disease_group=DiseaseGroup.SEPSIS
    )
    t0 = a.intime
    events = {
        "before_icu": make_event(admission=a.admission, time=t0 - timedelta(hours=3)),
        "norepinephrine": make_event(
            admission=a.admission,
            time=t0 + timedelta(minutes=10),
            kind=EventKind.ACTION,
            domain=Domain.MED_CONTINUOUS,
            category="norepinephrine",
            name="Norepinephrine",
            value_num=0.08,
            unit="mcg/kg/min",
            value_text="dose_change",
            previous_value="0.05",
            source_table="medication_admin_continuous",
        ),
        "between": make_event(admission=a.admission, time=t0 + timedelta(minutes=60)),
        "at_end": make_event(
            admission=a.admission, time=t0 + timedelta(hours=2, minutes=30)
        ),
        "after": make_event(admission=a.admission, time=t0 + timedelta(hours=3)),
        "death_early": make_event(
            admission=a.admission,
            time=t0 + timedelta(minutes=20),
            kind=EventKind.OUTCOME,
            domain=Domain.OUTCOME,
            category="death",
            name="Death",
        ),
        "disposition": make_event(
            admission=a.admission,
            time=t0 + timedelta(minutes=25),
            kind=EventKind.OBSERVATION,
            domain=Domain.ADT,
            category="discharge_disposition",
            name="Disposition",
        ),
    }
    windows = {
        "A": windows_build(stay=a),
        "B": windows_build(stay=b),
        "C": windows_build(stay=c),
    }
    assert [len(windows[s]) for s in "ABC"] == [2, 1, 1]
    return {"stays": (a, b, c), "events": events, "windows": windows}


@pytest.fixture
def tiny_labels(tiny_stays):
    """Reference labels of the four windows (see test_scoring for the sums)."""
    w = tiny_stays["windows"]
    ne = tiny_stays["events"]["norepinephrine"].pk
    return {
        w["A"][0]: (
            "deteriorating",
            oracle_payload(
                problems=["Septic shock", "AKI"],
                ratings=[(ne, "best_practice")],
                actions=["Blood cultures"],
                flags=["Fluid bolus"],
                evidence=[ne],
            ),
        ),
        w["A"][1]: ("stable", oracle_payload()),
        w["B"][0]: (
            "improving",
            oracle_payload(
                problems=["Delirium"],
                actions=["Haloperidol"],
                flags=["Benzodiazepines"],
            ),
        ),
        w["C"][0]: (
            "stable",
            oracle_payload(problems=["Hypokalemia"], actions=["Potassium"]),
        ),
    }


@pytest.fixture
def tiny_run(admin_user, tiny_labels):
    return make_oracle_run(admin=admin_user, labels=tiny_labels, name="tiny")


@pytest.fixture
def tiny_release(admin_user, tiny_run):
    release = release_create(
        user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
    )
    return release_build(release=release)
