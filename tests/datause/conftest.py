"""Fixtures of the data-use tests (issue 34): the exports tests' tiny release
made MIMIC-IV-derived (its stays linked to MIMIC-IV as the importer links
them), a cohort of MIMIC-IV stays with windows, backbones on a public and a
private host, and the address policy's resolver played by the test."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from accounts.roles import Role
from exports.building import release_build
from exports.models import ReleaseKind
from exports.services import release_create
from oracle.models import Backbone, BackboneKind
from tests.annotation.conftest import make_role_user
from tests.exports.conftest import (  # noqa: F401 - fixtures
    physician,
    release_dirs,
    tiny_labels,
    tiny_release,
    tiny_run,
    tiny_stays,
)
from tests.exports.helpers import make_oracle_run
from tests.factories import make_admission, make_events, make_patient, make_stay
from tests.oracle.address_forms import fake_dns  # noqa: F401 - fixture
from windows.datasources import MIMIC_IV, stays_link
from windows.models import Cohort, CohortStay, CohortStratum, Source
from windows.windowing import windows_build

PUBLIC_HOST = "llm.example.com"
PUBLIC_ADDRESS = "93.184.216.34"
PRIVATE_HOST = "llm.internal"
PRIVATE_ADDRESS = "10.9.8.7"


@pytest.fixture
def dns(fake_dns):  # noqa: F811 - the fixture of the address tests
    fake_dns.answer(PUBLIC_HOST, PUBLIC_ADDRESS)
    fake_dns.answer(PRIVATE_HOST, PRIVATE_ADDRESS)
    fake_dns.answer("agent.example.org", "93.184.216.35")
    return fake_dns


@pytest.fixture
def second_researcher(db):
    return make_role_user(Role.RESEARCHER)


@pytest.fixture
def mimic_release(admin_user, tiny_stays, tiny_labels):
    """The tiny Scale release, its stays imported from MIMIC-IV."""
    stays_link(stay_ids=[s.pk for s in tiny_stays["stays"]], keys=[MIMIC_IV])
    run = make_oracle_run(admin=admin_user, labels=tiny_labels, name="mimic")
    release = release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    return release_build(release=release)


def mimic_cohort(name: str = "mimic cohort", *, hours: float = 6.0) -> Cohort:
    """A cohort of one MIMIC-IV stay (linked to nothing: its source's
    catalogue entry, MIMIC-IV) with vitals every hour and its windows."""
    return _one_stay_cohort(name, hours, make_patient(source=Source.MIMIC))


def clif_cohort(name: str = "clif cohort", *, hours: float = 6.0) -> Cohort:
    return _one_stay_cohort(name, hours, make_patient())


def _one_stay_cohort(name: str, hours: float, patient) -> Cohort:
    """A cohort of one stay of ``patient``, vitals every hour, its windows."""
    stay = make_stay(admission=make_admission(patient=patient), hours=hours)
    make_events(admission=stay.admission, count=int(hours), start=stay.intime)
    windows_build(stay=stay)
    cohort = Cohort.objects.create(name=name, seed=0, target_size=1)
    CohortStay.objects.create(
        cohort=cohort, stay=stay, stratum=CohortStratum.SURVIVED_SHORT
    )
    return cohort


def backbone(name: str, host: str) -> Backbone:
    return Backbone.objects.create(
        name=name,
        kind=BackboneKind.OPENAI,
        base_url=f"https://{host}/v1",
        model="gpt-test",
    )


@pytest.fixture
def public_backbone(db):
    return backbone("cloud", PUBLIC_HOST)


@pytest.fixture
def private_backbone(db):
    return backbone("on-site", PRIVATE_HOST)


def days(n: int) -> datetime.date:
    return timezone.localdate() + datetime.timedelta(days=n)
