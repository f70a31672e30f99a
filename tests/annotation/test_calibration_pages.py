"""Threshold calibration's pages: judging with the S / D keys, the report
(the tau in force and where it comes from, its plot) and the adoption, a draw
queued to a worker job, the invitations, and 403s and 404s for those who may
not see them."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils.html import escape

from accounts.roles import Role
from annotation.calibration import (
    calibration_draw_request,
    calibration_draw_run,
    calibration_invitation_withdraw,
    calibration_invite,
)
from annotation.models import (
    CalibrationDraw,
    CalibrationInvitation,
    CalibrationJudgment,
    CalibrationSet,
    TauAdoption,
)
from evaluation.matcher import SemanticMatcher
from evaluation.models import MatcherModel
from jobs.models import OutboxMessage

from .calibration_data import draw_pairs, judge, judged_set  # noqa: F401
from .conftest import make_role_user
from .consensus_data import stay  # noqa: F401 - stay, a fixture

HTMX = {"HTTP_HX_REQUEST": "true"}


def _status(client, name: str, *args, data=None) -> int:
    """The status of a GET of the page ``annotation:<name>`` (a POST of
    ``data`` when given)."""
    url = reverse(f"annotation:{name}", args=args)
    return (client.get(url) if data is None else client.post(url, data)).status_code


# Pages ---------------------------------------------------------------------------


def test_physician_judges_pairs_on_the_page_one_after_another(
    client, judged_set, physicians
):
    judge = make_role_user(Role.PHYSICIAN)
    client.force_login(judge)
    url = reverse("annotation:calibration_judge", args=[judged_set.pk])
    # not invited: the set is not there
    assert client.get(url).status_code == 404
    assert (
        judged_set.name
        not in client.get(reverse("annotation:calibration_list")).content.decode()
    )
    calibration_invite(
        admin=judged_set.created_by, calibration_set=judged_set, judges=[judge]
    )
    assert (
        judged_set.name
        in client.get(reverse("annotation:calibration_list")).content.decode()
    )
    post_url = reverse("annotation:calibration_judge_post", args=[judged_set.pk])

    page = client.get(url).content.decode()
    first = judged_set.pairs.get(position=0)
    assert f'data-pair-id="{first.pk}"' in page
    assert "<kbd>S</kbd>" in page and "<kbd>D</kbd>" in page
    assert "0.9" not in page  # no cosine shown to the judge

    response = client.post(post_url, {"pair": first.pk, "judgment": "same"}, **HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="judge-pair"')
    assert CalibrationJudgment.objects.get(pair=first, judge=judge).same is True
    second = judged_set.pairs.get(position=1)
    assert f'data-pair-id="{second.pk}"' in html
    assert 'data-judged="1"' in html

    bad = client.post(post_url, {"pair": second.pk, "judgment": "perhaps"}, **HTMX)
    assert "same item or different" in bad.content.decode()
    assert not CalibrationJudgment.objects.filter(pair=second, judge=judge).exists()


def test_admin_sees_the_report_with_its_plot_and_adopts_a_tau(
    client, judged_set, admin_user, matcher
):
    client.force_login(admin_user)
    url = reverse("annotation:calibration_report", args=[judged_set.pk])

    html = client.get(url).content.decode()
    assert '<tr data-tau="0.4" class="is-best">' in html
    assert 'data-chart="tau-sweep-chart"' in html
    assert '"kind": "lines"' in html and '"label": "best F1"' in html
    assert 'data-used="6"' in html

    response = client.post(
        reverse("annotation:calibration_adopt", args=[judged_set.pk]),
        {"tau": "0.6", "reason": "Table"},
    )
    assert response.status_code == 302
    assert MatcherModel.objects.get(name=matcher.model_name).tau == 0.6
    page = client.get(url).content.decode()
    assert f"by <span data-author>{admin_user.username}</span>" in page


def test_the_set_report_says_which_tau_is_in_force_and_where_it_comes_from(
    client, judged_set, admin_user, matcher
):
    client.force_login(admin_user)
    url = reverse("annotation:calibration_report", args=[judged_set.pk])
    in_force = SemanticMatcher(matcher.model_name)

    html = client.get(url).content.decode()

    assert f"<strong data-current-tau>{in_force.tau:.2f}</strong>" in html
    assert escape(in_force.tau_source) in html
    assert reverse("annotation:calibration_reference") in html


def test_admin_draws_a_set_from_the_list_page_through_a_worker_job(
    client, labelled, admin_user, matcher, judge
):
    client.force_login(admin_user)
    form = {
        "name": "From page",
        "campaigns": [labelled.pk],
        "per_stratum": "2",
        "band": "0.15",
    }
    response = client.post(
        reverse("annotation:calibration_draw"),
        {**form, "seed": "0", "judges": [judge.pk]},
    )
    # The web request only queues the draw: no set yet, a job for a worker.
    assert not CalibrationSet.objects.filter(name="From page").exists()
    draw = CalibrationDraw.objects.get(name="From page")
    assert draw.state == "queued"
    assert list(draw.judges.values_list("pk", flat=True)) == [judge.pk]
    assert OutboxMessage.objects.filter(
        task="annotation.tasks.calibration_draw_task", args=[draw.pk]
    ).exists()
    progress = reverse("annotation:calibration_draw_progress", args=[draw.pk])
    assert response["Location"] == progress
    page = client.get(progress, **HTMX)
    assert 'data-draw-state="queued"' in page.content.decode()
    assert 'hx-trigger="every 1s"' in page.content.decode()

    assert calibration_draw_run(draw_id=draw.pk, matcher_factory=lambda: matcher) == (
        "done"
    )

    drawn = CalibrationSet.objects.get(name="From page")
    assert list(drawn.invitations.values_list("judge", flat=True)) == [judge.pk]
    report = reverse("annotation:calibration_report", args=[drawn.pk])
    polled = client.get(progress, **HTMX)
    assert polled["HX-Redirect"] == report
    assert client.get(progress)["Location"] == report
    # A redelivered message finds the job finished and draws nothing more.
    assert calibration_draw_run(draw_id=draw.pk, matcher_factory=lambda: matcher) == (
        "not taken"
    )
    assert CalibrationSet.objects.filter(name="From page").count() == 1

    bad = client.post(
        reverse("annotation:calibration_draw"),
        {"name": "Bad", "campaigns": [labelled.pk], "per_stratum": "x", "band": "0.1"},
        follow=True,
    )
    assert "must be numbers" in bad.content.decode()
    # The same form again: the name is taken.
    taken = client.post(reverse("annotation:calibration_draw"), form, follow=True)
    assert "already exists" in taken.content.decode()
    assert not CalibrationDraw.objects.filter(name="Bad").exists()
    assert CalibrationDraw.objects.count() == 1


def test_a_draw_with_nothing_to_pair_fails_with_the_reason_on_its_page(
    client, gold, admin_user, matcher
):
    draw = calibration_draw_request(admin=admin_user, name="Empty", campaigns=[gold])

    assert calibration_draw_run(draw_id=draw.pk, matcher_factory=lambda: matcher) == (
        "failed"
    )

    draw.refresh_from_db()
    assert draw.state == "failed" and "nothing to pair" in draw.error
    assert not CalibrationSet.objects.exists()
    client.force_login(admin_user)
    page = client.get(
        reverse("annotation:calibration_draw_progress", args=[draw.pk])
    ).content.decode()
    assert 'data-draw-state="failed"' in page and "nothing to pair" in page
    assert "hx-trigger" not in page.split('id="draw-progress"')[1].split(">")[0]


def test_a_rerun_after_a_crash_takes_the_set_already_drawn(
    labelled, admin_user, matcher, judge
):
    draw = calibration_draw_request(
        admin=admin_user,
        name="Crash",
        campaigns=[labelled],
        per_stratum=2,
        judges=[judge],
    )
    drawn = draw_pairs(
        admin_user, "Crash", [labelled], matcher, per_stratum=2, judges=[judge]
    )

    def no_model():
        raise AssertionError("the set is drawn: no model is needed")

    assert calibration_draw_run(draw_id=draw.pk, matcher_factory=no_model) == "done"
    draw.refresh_from_db()
    assert draw.calibration_set == drawn and draw.state == "done"


def test_only_admins_queue_draws(labelled, physicians):
    with pytest.raises(PermissionDenied):
        calibration_draw_request(admin=physicians[0], name="X", campaigns=[labelled])
    assert not CalibrationDraw.objects.exists()


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_report_draw_and_adopt_are_403_for_non_admins(client, judged_set, role):
    client.force_login(make_role_user(role))

    assert _status(client, "calibration_report", judged_set.pk) == 403
    assert (
        _status(client, "calibration_adopt", judged_set.pk, data={"tau": "0.6"}) == 403
    )
    assert _status(client, "calibration_draw", data={"name": "x"}) == 403
    assert not TauAdoption.objects.exists()
    assert CalibrationSet.objects.count() == 1


def test_researchers_do_not_judge(client, judged_set, researcher):
    client.force_login(researcher)
    assert _status(client, "calibration_list") == 403
    assert _status(client, "calibration_judge", judged_set.pk) == 403
    assert (
        _status(
            client,
            "calibration_judge_post",
            judged_set.pk,
            data={"pair": judged_set.pairs.first().pk, "judgment": "same"},
        )
        == 403
    )


# Invitations --------------------------------------------------------------------


def test_admin_invites_and_withdraws_judges_on_the_report_page(
    client, judged_set, admin_user, physicians
):
    newcomer = make_role_user(Role.PHYSICIAN)
    client.force_login(admin_user)
    report = reverse("annotation:calibration_report", args=[judged_set.pk])
    page = client.get(report).content.decode()
    assert f'data-judge="{physicians[0].pk}"' in page
    assert f'<option value="{newcomer.pk}">' in page

    response = client.post(
        reverse("annotation:calibration_invite", args=[judged_set.pk]),
        {"judges": [newcomer.pk]},
    )
    assert response.status_code == 302
    invitation = CalibrationInvitation.objects.get(
        calibration_set=judged_set, judge=newcomer
    )
    assert invitation.invited_by == admin_user
    assert f'data-judge="{newcomer.pk}"' in client.get(report).content.decode()

    client.post(
        reverse("annotation:calibration_invitation_withdraw", args=[judged_set.pk]),
        {"judge": newcomer.pk},
    )
    assert not CalibrationInvitation.objects.filter(judge=newcomer).exists()
    client.force_login(newcomer)
    assert _status(client, "calibration_judge", judged_set.pk) == 404


def test_bad_invitations_are_refused_and_nothing_is_written(
    judged_set, admin_user, physicians, researcher
):
    before = CalibrationInvitation.objects.count()
    with pytest.raises(ValidationError, match="Only active physicians judge"):
        calibration_invite(
            admin=admin_user, calibration_set=judged_set, judges=[researcher]
        )
    with pytest.raises(ValidationError, match="Choose the physicians"):
        calibration_invite(admin=admin_user, calibration_set=judged_set, judges=[])
    with pytest.raises(PermissionDenied):
        calibration_invite(
            admin=physicians[0],
            calibration_set=judged_set,
            judges=[make_role_user(Role.PHYSICIAN)],
        )
    with pytest.raises(ValidationError, match="No such judge"):
        calibration_invitation_withdraw(
            admin=admin_user, calibration_set=judged_set, judge_id="abc"
        )
    assert CalibrationInvitation.objects.count() == before
    # inviting someone already invited changes nothing
    assert (
        calibration_invite(
            admin=admin_user, calibration_set=judged_set, judges=[physicians[0]]
        )
        == 0
    )
    assert CalibrationInvitation.objects.count() == before


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_invite_and_withdraw_are_403_for_non_admins(
    client, judged_set, physicians, role
):
    client.force_login(make_role_user(role))
    before = CalibrationInvitation.objects.count()
    assert (
        _status(
            client,
            "calibration_invite",
            judged_set.pk,
            data={"judges": [physicians[0].pk]},
        )
        == 403
    )
    assert (
        _status(
            client,
            "calibration_invitation_withdraw",
            judged_set.pk,
            data={"judge": physicians[0].pk},
        )
        == 403
    )
    assert CalibrationInvitation.objects.count() == before
