"""The job kinds the apps register (jobs.registry): each kind's queued, running
and failed states, given once by its model's choices class, or by name where a
kind calls its running state otherwise."""

import pytest
from django.db import models

from exports.models import ReleaseState
from jobs.registry import JobKind, kinds

# What the reaper reads off each kind: (queued, running, failed).
REGISTERED = {
    "agent-stay": ("queued", "running", "failed"),
    "agreement-recompute": ("queued", "running", "failed"),
    "calibration-draw": ("queued", "running", "failed"),
    "release": ("queued", "building", "failed"),
    "submission": ("queued", "scoring", "failed"),
    "oracle-run": ("queued", "running", "failed"),
    "oracle-validation": ("queued", "running", "failed"),
    "import": ("queued", "running", "failed"),
    "build": ("queued", "running", "failed"),
    "import-batch": ("queued", "running", "failed"),
}


# Values other than the members' names: the kind reads the members.
Mashing = models.TextChoices(
    "Mashing",
    {
        "QUEUED": "waiting",
        "RUNNING": "mashing",
        "BOILING": "boiling",
        "FAILED": "spoilt",
    },
)


def brew_kind(**states) -> JobKind:
    return JobKind(name="brew", model="brew.Brew", task="brew.brew", **states)


def test_every_registered_kind_has_its_models_queued_running_and_failed_states():
    registered = {
        kind.name: (kind.queued, kind.running, kind.failed) for kind in kinds()
    }
    assert registered == REGISTERED


def test_a_kind_takes_its_three_states_from_its_choices_class():
    kind = brew_kind(states=Mashing)
    assert (kind.queued, kind.running, kind.failed) == ("waiting", "mashing", "spoilt")
    assert kind.failure("burnt", "stopped", now=None)["state"] == "spoilt"


def test_a_state_named_otherwise_is_given_by_itself_and_wins():
    kind = brew_kind(states=Mashing, running=Mashing.BOILING)
    assert (kind.queued, kind.running, kind.failed) == ("waiting", "boiling", "spoilt")


def test_a_kind_without_states_takes_all_three_by_name():
    kind = brew_kind(queued="pitched", running="fermenting", failed="infected")
    assert kind.resumed("admin", now=None)["state"] == "pitched"
    assert (kind.running, kind.failed) == ("fermenting", "infected")


def test_a_kind_missing_a_state_is_refused_at_registration():
    with pytest.raises(TypeError, match="'brew' has no running state"):
        brew_kind(queued="waiting", failed="spoilt")


def test_a_choices_class_without_a_running_member_needs_it_named():
    with pytest.raises(TypeError, match="'brew' has no running state"):
        brew_kind(states=ReleaseState)
    kind = brew_kind(states=ReleaseState, running=ReleaseState.BUILDING)
    assert (kind.queued, kind.running, kind.failed) == ("queued", "building", "failed")
