"""Fixtures of the exports tests: users by role, release folders under the
test's tmp dir, and a tiny Scale release whose metrics are computed by hand."""

import pytest

from accounts.roles import Role
from exports.building import release_build
from exports.models import ReleaseKind
from exports.services import release_create
from tests.annotation.conftest import make_role_user
from tests.factories import death, drip, event_at, make_admission, make_stay
from windows.models import DiseaseGroup, Domain
from windows.windowing import windows_build

from .helpers import make_consensus, make_oracle_run, oracle_payload


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
    events = {
        "before_icu": event_at(a, -3),
        "norepinephrine": drip(
            a, "norepinephrine", 0.08, 10 / 60, "dose_change", previous_value="0.05"
        ),
        "between": event_at(a, 1),
        "at_end": event_at(a, 2.5),
        "after": event_at(a, 3),
        "death_early": death(a, 20 / 60),
        "disposition": event_at(
            a,
            25 / 60,
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


CONSENSUS = {
    "A0": ("stable", ["AKI"]),
    "A1": ("stable", []),
    "B0": ("improving", ["Delirium"]),
}


@pytest.fixture
def rectified_release(tiny_release, tiny_stays):
    """The tiny release with a consensus on three windows of its validation
    campaign (CONSENSUS): a release the Scale intervals are rectified on."""
    campaign = tiny_release.validation_report.campaign
    w = tiny_stays["windows"]
    windows = {"A0": w["A"][0], "A1": w["A"][1], "B0": w["B"][0]}
    for key, (status, problems) in CONSENSUS.items():
        make_consensus(
            campaign=campaign, window=windows[key], status=status, problems=problems
        )
    return tiny_release
