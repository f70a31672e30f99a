"""manage.py oracle_run: its exit status tells a script whether the run did
what was asked (issue 32, item 5)."""

import io

import pytest
from django.core.management import CommandError, call_command

from oracle.models import OracleLabel, OracleLabelState, OracleRun
from tests.oracle.helpers import fake_backbone

pytestmark = pytest.mark.django_db


def test_a_run_with_failed_windows_exits_non_zero_with_the_reasons(
    admin_user, cohort_data, fake_llm
):
    cohort, _, windows = cohort_data
    fake_backbone(admin_user, fake_llm)
    for _ in range(2):  # the reply and its repair: the first window fails
        fake_llm.push(content="this is not json")
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"1 of \d+ windows failed \(1 × "):
        call_command(
            "oracle_run",
            f"--cohort={cohort.pk}",
            "--backbone=fake",
            "--inline",
            "--chunk-size=1",
            f"--admin={admin_user.username}",
            stdout=out,
            stderr=io.StringIO(),
        )
    run = OracleRun.objects.get()
    assert run.labels.filter(state=OracleLabelState.FAILED).count() == 1
    assert OracleLabel.objects.filter(run=run).count() == len(windows)
    assert "1 failed, 0 to do" in out.getvalue()


def test_a_run_that_labels_every_window_exits_zero(admin_user, cohort_data, fake_llm):
    cohort, _, windows = cohort_data
    fake_backbone(admin_user, fake_llm)
    out = io.StringIO()
    call_command(
        "oracle_run",
        f"--cohort={cohort.pk}",
        "--backbone=fake",
        "--inline",
        f"--admin={admin_user.username}",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert f"{len(windows)} labelled, 0 failed, 0 to do" in out.getvalue()
