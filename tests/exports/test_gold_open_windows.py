"""A Gold build of a campaign whose windows are not all closed warns, on the
page and on the command line, how many are left out (issue 32, item 5)."""

import io

import pytest
from django.core.management import call_command

from annotation.services import campaign_create, window_consensus_refresh
from exports.models import Release
from tests.annotation.conftest import (  # noqa: F401 - fixtures
    make_gold_windows,
    matcher,
    physicians,
    stay,
)
from tests.annotation.consensus_data import submit

pytestmark = pytest.mark.django_db


def half_open_campaign(admin_user, physicians, stay, matcher, *, labelled=3):
    windows = make_gold_windows(stay=stay, count=6)
    campaign = campaign_create(
        admin=admin_user,
        name="Gold half open",
        windows=windows,
        physicians=physicians,
        evidence_required=False,
    )
    for window in windows[:labelled]:
        for p in physicians:
            submit(p, campaign, window, "stable")
        window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    return campaign


def test_gold_build_with_open_windows_warns_on_the_page_and_the_command(
    client, admin_user, physicians, stay, matcher, release_dirs
):
    campaign = half_open_campaign(admin_user, physicians, stay, matcher)
    client.force_login(admin_user)
    response = client.post(
        "/releases/build/", {"kind": "gold", "campaign": campaign.pk}, follow=True
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "3 of 6 windows of campaign" in page and "still open" in page
    assert Release.objects.count() == 1

    err = io.StringIO()
    call_command(
        "build_release",
        f"--campaign={campaign.pk}",
        f"--user={admin_user.username}",
        stdout=io.StringIO(),
        stderr=err,
    )
    assert "Warning: 3 of 6 windows" in err.getvalue()


def test_gold_build_of_a_closed_campaign_gives_no_warning(
    client, admin_user, physicians, stay, matcher, release_dirs
):
    campaign = half_open_campaign(admin_user, physicians, stay, matcher, labelled=6)
    client.force_login(admin_user)
    response = client.post(
        "/releases/build/", {"kind": "gold", "campaign": campaign.pk}, follow=True
    )
    assert "queued for building" in response.content.decode()
    assert "still open" not in response.content.decode()
