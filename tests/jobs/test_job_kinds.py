"""The job kinds the apps register (jobs.registry): each kind's queued, running
and failed states, given once by its model's choices class, or by name where a
kind calls its running state otherwise."""

import pytest
from django.db import models

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


class Mashing(models.TextChoices):
    QUEUED = "waiting", "Waiting"
    RUNNING = "mashing", "Mashing"
    BOILING = "boiling", "Boiling"
    FAILED = "spoilt", "Spoilt"


def test_every_registered_kind_has_its_models_queued_running_and_failed_states():
    registered = {
        kind.name: (kind.queued, kind.running, kind.failed) for kind in kinds()
    }
    assert registered == REGISTERED


def test_a_kind_takes_its_three_states_from_its_choices_class():
    kind = JobKind(name="mash", model="brew.Mash", task="brew.mash", states=Mashing)
    assert (kind.queued, kind.running, kind.failed) == ("waiting", "mashing", "spoilt")
    assert kind.failure("burnt", "stopped", now=None)["state"] == "spoilt"


def test_a_state_named_otherwise_is_given_by_itself_and_wins():
    kind = JobKind(
        name="boil",
        model="brew.Boil",
        task="brew.boil",
        states=Mashing,
        running=Mashing.BOILING,
    )
    assert (kind.queued, kind.running, kind.failed) == ("waiting", "boiling", "spoilt")


def test_a_kind_without_states_takes_all_three_by_name():
    kind = JobKind(
        name="ferment",
        model="brew.Ferment",
        task="brew.ferment",
        queued="pitched",
        running="fermenting",
        failed="infected",
    )
    assert kind.resumed("admin", now=None)["state"] == "pitched"
    assert (kind.running, kind.failed) == ("fermenting", "infected")


def test_a_kind_missing_a_state_is_refused_at_registration():
    with pytest.raises(TypeError, match="'cellar' has no running state"):
        JobKind(
            name="cellar",
            model="brew.Cellar",
            task="brew.cellar",
            queued="waiting",
            failed="spoilt",
        )


class Bottling(models.TextChoices):
    QUEUED = "queued", "Queued"
    FILLING = "filling", "Filling"
    FAILED = "failed", "Failed"


def test_a_choices_class_without_a_running_member_needs_it_named():
    with pytest.raises(TypeError, match="'bottle' has no running state"):
        JobKind(name="bottle", model="brew.Bottle", task="brew.bottle", states=Bottling)
    kind = JobKind(
        name="bottle",
        model="brew.Bottle",
        task="brew.bottle",
        states=Bottling,
        running=Bottling.FILLING,
    )
    assert kind.running == "filling"
