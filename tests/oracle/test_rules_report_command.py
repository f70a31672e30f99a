"""manage.py oracle_rules_report on constructed stays: a patient who dies in the
ICU while weaning pressors (withdrawal) against a survivor who is weaned."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.factories import drip, make_admission, make_patient, make_stay, vitals
from tests.oracle.helpers import windows_of
from windows.models import Outcome

pytestmark = pytest.mark.django_db


def weaned_stay(*, died: bool):
    """24 h on norepinephrine 0.3 with MAP 70, weaned to 0.1 from 16 h."""
    patient = make_patient()
    stay = make_stay(
        admission=make_admission(patient=patient),
        hours=24,
        hospital_outcome=Outcome.DIED if died else Outcome.SURVIVED,
    )
    if died:
        patient.death_time = stay.outtime - timedelta(hours=1)
        patient.save(update_fields=["death_time"])
    vitals(stay, "heart_rate", 90, start_h=-1, end_h=24, unit="bpm")
    vitals(stay, "map", 70, start_h=-1, end_h=24, unit="mmHg")
    drip(stay, "norepinephrine", 0.3, 0.5)
    drip(stay, "norepinephrine", 0.1, 16.2, text="dose_change")
    windows_of(stay)
    return stay


def test_report_separates_stays_ending_in_death_from_survivors():
    weaned_stay(died=True)
    weaned_stay(died=False)
    out = StringIO()

    call_command("oracle_rules_report", "--checks", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[1].split() == ["windows", "improving", "stable", "deteriorating"]

    def counts(prefix: str) -> list[int]:
        [line] = [line for line in lines if line.startswith(prefix)]
        return [int(n) for n in re.findall(r"(\d+) \(\s*[\d.]+ %\)", line)]

    death, survivors = counts("ends in death (1 stays)"), counts("survivors (1 stays)")
    # Windows ending in the last 12 h of each 24-h stay: 12 h ... 22 h, six.
    assert sum(death) == sum(survivors) == 6
    # The same weaning at 16 h: improving for the survivor, never before death.
    assert survivors[0] >= 1 and death[0] == 0
    assert any(line.startswith("  shock on vasopressors:") for line in lines)
    assert any("AKI problem switched" in line for line in lines)


def test_report_without_windows_says_what_to_do():
    make_stay(hours=12)

    with pytest.raises(CommandError, match="build_windows"):
        call_command("oracle_rules_report")
