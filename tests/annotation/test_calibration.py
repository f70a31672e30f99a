"""Threshold calibration: the tau sweep against hand-computed figures, pairs
drawn from real labels in their cosine strata, physicians' judgments, the
report and the admin adopting a tau (recorded, and used by the next matcher);
the pages with the S / D keys, and 404s for those who may not see them."""

import math

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils.html import escape

from accounts.roles import Role
from annotation.blindness import calibration_pairs_visible_to
from annotation.calibration import (
    calibration_draw_request,
    calibration_draw_run,
    calibration_invitation_withdraw,
    calibration_invite,
    calibration_set_draw,
)
from annotation.calibration_judging import (
    calibration_judge,
    calibration_report,
    tau_adopt,
)
from annotation.models import (
    CalibrationDraw,
    CalibrationInvitation,
    CalibrationJudgment,
    CalibrationPair,
    CalibrationSet,
    TauAdoption,
)
from evaluation.calibration import best_row, majority, sweep_taus, tau_sweep
from evaluation.matcher import SemanticMatcher
from evaluation.models import MatcherModel
from jobs.models import OutboxMessage

from .conftest import make_role_user
from .consensus_data import gold, labelled, matcher, stay, submit, windows  # noqa: F401

HTMX = {"HTTP_HX_REQUEST": "true"}
COSINES = [0.9, 0.7, 0.55, 0.45, 0.35, 0.2]
SAME = [True, True, False, True, False, False]


# The sweep (pure) -----------------------------------------------------------------


def test_sweep_taus_run_from_0_3_to_0_9_by_0_05():
    taus = sweep_taus()
    assert taus[0] == 0.3 and taus[-1] == 0.9 and len(taus) == 13
    assert 0.5 in taus and 0.65 in taus


def test_tau_sweep_matches_hand_computed_figures():
    rows = {r.tau: r for r in tau_sweep(COSINES, SAME, [0.3, 0.5, 0.6, 0.8, 0.95])}

    # tau 0.3: predicted 0.9 0.7 0.55 0.45 0.35 -> TP 3, FP 2, FN 0, TN 1.
    r = rows[0.3]
    assert (r.tp, r.fp, r.fn, r.tn) == (3, 2, 0, 1)
    assert r.accuracy == pytest.approx(4 / 6)
    assert r.precision == pytest.approx(3 / 5)
    assert r.recall == pytest.approx(1.0)
    assert r.f1 == pytest.approx(0.75)
    # tau 0.5: TP 2, FP 1 (0.55), FN 1 (0.45), TN 2.
    r = rows[0.5]
    assert (r.tp, r.fp, r.fn, r.tn) == (2, 1, 1, 2)
    assert (r.accuracy, r.precision, r.recall) == pytest.approx((4 / 6, 2 / 3, 2 / 3))
    assert r.f1 == pytest.approx(2 / 3)
    # tau 0.6: TP 2, FP 0, FN 1, TN 3.
    r = rows[0.6]
    assert (r.accuracy, r.precision, r.recall, r.f1) == pytest.approx(
        (5 / 6, 1.0, 2 / 3, 0.8)
    )
    # tau 0.8: TP 1, FN 2, TN 3.
    r = rows[0.8]
    assert (r.accuracy, r.precision, r.recall, r.f1) == pytest.approx(
        (4 / 6, 1.0, 1 / 3, 0.5)
    )
    # tau 0.95: nothing predicted: precision undefined, F1 0.
    r = rows[0.95]
    assert math.isnan(r.precision)
    assert (r.accuracy, r.recall, r.f1) == pytest.approx((0.5, 0.0, 0.0))
    assert best_row(list(rows.values())).tau == 0.6


def test_a_cosine_equal_to_tau_is_a_match():
    (row,) = tau_sweep([0.5], [True], [0.5])
    assert row.tp == 1


def test_sweep_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="one of each per pair"):
        tau_sweep([0.5, 0.6], [True])


def test_majority_of_judgments():
    assert majority([True, True, False]) is True
    assert majority([False]) is False
    assert majority([True, False]) is None
    assert majority([]) is None


# Drawing pairs from labels ---------------------------------------------------------


def _status(client, name: str, *args, data=None) -> int:
    """The status of a GET of the page ``annotation:<name>`` (a POST of
    ``data`` when given)."""
    url = reverse(f"annotation:{name}", args=args)
    return (client.get(url) if data is None else client.post(url, data)).status_code


def _draw(admin, name, campaigns, matcher, **options):
    return calibration_set_draw(
        admin=admin, name=name, campaigns=campaigns, matcher=matcher, **options
    )


@pytest.fixture
def judge(db):
    """A physician who rates no window: every window may give them items."""
    return make_role_user(Role.PHYSICIAN)


def test_pairs_are_drawn_from_the_labels_in_their_cosine_strata(
    labelled, admin_user, matcher, judge
):
    drawn = _draw(
        admin_user,
        "Cal 1",
        [labelled],
        matcher,
        per_stratum=3,
        band=0.2,
        seed=1,
        judges=[judge],
    )

    pairs = list(drawn.pairs.all())
    assert drawn.model_name == matcher.model_name
    assert drawn.tau_at_draw == 0.5
    assert 1 <= len(pairs) <= 9
    texts = {
        "Septic shock",
        "Respiratory failure",
        "Shock due to sepsis",
        "Delirium",
        "Hypokalemia",
        "Blood cultures",
        "Obtain blood cultures",
        "Avoid fluid overload",
        "Avoid excessive fluids",
        "Avoid nephrotoxic drugs",
    }
    for pair in pairs:
        assert {pair.text_a, pair.text_b} <= texts
        assert pair.text_a != pair.text_b
        cosine = float(matcher.similarity([pair.text_a], [pair.text_b])[0, 0])
        assert pair.cosine == pytest.approx(cosine, abs=1e-5)
        if pair.stratum == "near_match":
            assert 0.5 <= pair.cosine < 0.7
        elif pair.stratum == "near_miss":
            assert 0.3 <= pair.cosine < 0.5
        assert len(pair.sources) == 2 and pair.sources[0]["label_id"]
    assert sum(p.stratum == "random" for p in pairs) == 3
    assert sorted(p.position for p in pairs) == list(range(len(pairs)))
    assert list(drawn.invitations.values_list("judge", flat=True)) == [judge.pk]


def test_drawn_pairs_store_the_guarded_similarity_so_an_opposite_pair_gets_minus_one(
    gold, physicians, windows, admin_user, matcher, judge
):
    a, b = physicians
    submit(a, gold, windows[1], "stable", added=["Start norepinephrine infusion"])
    submit(b, gold, windows[1], "stable", added=["Stop norepinephrine infusion"])

    drawn = _draw(
        admin_user,
        "Opposites",
        [gold],
        matcher,
        per_stratum=3,
        band=0.3,
        seed=0,
        judges=[judge],
    )

    (pair,) = drawn.pairs.all()
    # The model reads them as near the same: only the guard tells them apart.
    raw = float(matcher.cosine([pair.text_a], [pair.text_b])[0, 0])
    assert raw >= matcher.tau
    assert pair.cosine == -1.0
    assert pair.stratum == "random"  # -1 is in no band near tau


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


def test_without_judges_only_closed_windows_give_items(
    labelled, admin_user, matcher, windows
):
    """Window 0 is adjudicated; windows 1 and 3 stay open and give nothing
    (window 2, closed as agreed, has no item)."""
    from django.utils import timezone

    from annotation.models import CampaignWindow

    CampaignWindow.objects.filter(campaign=labelled, window=windows[0]).update(
        adjudicated_at=timezone.now()
    )
    drawn = _draw(admin_user, "Closed", [labelled], matcher, per_stratum=50, band=0.5)
    texts = {t for p in drawn.pairs.all() for t in (p.text_a, p.text_b)}
    assert texts and texts <= {
        "Septic shock",
        "Respiratory failure",
        "Shock due to sepsis",
        "Blood cultures",
        "Obtain blood cultures",
        "Avoid fluid overload",
        "Avoid excessive fluids",
    }
    assert not drawn.invitations.exists()


def test_a_judge_who_rates_the_windows_gets_no_item_of_them_nor_of_their_co_raters(
    labelled, admin_user, matcher, physicians, judge
):
    """Drawn for physician a, who rates every window of the campaign with b:
    nothing is left to pair (a's own items come from open windows too)."""
    with pytest.raises(ValidationError, match="nothing to pair"):
        _draw(
            admin_user,
            "For a",
            [labelled],
            matcher,
            per_stratum=5,
            judges=[physicians[0], judge],
        )
    assert not CalibrationSet.objects.exists()


def test_an_invited_rater_is_never_shown_a_pair_with_a_co_raters_words(
    labelled, admin_user, matcher, physicians, judge
):
    """Drawn for an outside judge, then a (who co-rates every window with b) is
    invited: a is shown only pairs without b's words, and cannot judge the
    others by forging their id."""
    drawn = _draw(
        admin_user,
        "Late",
        [labelled],
        matcher,
        per_stratum=20,
        band=0.5,
        judges=[judge],
    )
    a, b = physicians
    calibration_invite(admin=admin_user, calibration_set=drawn, judges=[a])
    b_words = {
        "shock due to sepsis",
        "obtain blood cultures",
        "avoid excessive fluids",
        "delirium",
    }
    shown = list(calibration_pairs_visible_to(user=a, calibration_set=drawn))
    hidden = [
        p for p in drawn.pairs.all() if {p.text_a.lower(), p.text_b.lower()} & b_words
    ]
    assert hidden
    assert not {p.pk for p in shown} & {p.pk for p in hidden}
    assert len(shown) == drawn.pairs.count() - len(hidden)
    with pytest.raises(ValidationError, match="No such pair"):
        calibration_judge(
            judge=a, calibration_set=drawn, pair_id=hidden[0].pk, same=True
        )
    assert not CalibrationJudgment.objects.exists()
    # the outside judge sees every pair
    assert calibration_pairs_visible_to(user=judge, calibration_set=drawn).count() == (
        drawn.pairs.count()
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"name": " "}, "Give the calibration set a name"),
        ({"campaigns": []}, "Choose at least one campaign"),
        ({"per_stratum": 0}, "Pairs per stratum must be a whole number"),
        ({"band": 0.9}, "The band must be above 0"),
    ],
)
def test_bad_draws_are_refused_and_nothing_is_written(
    labelled, admin_user, matcher, changes, message
):
    arguments = {
        "admin": admin_user,
        "name": "Cal",
        "campaigns": [labelled],
        "matcher": matcher,
        "per_stratum": 3,
        "band": 0.15,
    }
    with pytest.raises(ValidationError, match=message):
        calibration_set_draw(**{**arguments, **changes})
    assert not CalibrationSet.objects.exists()
    assert not CalibrationPair.objects.exists()


def test_a_campaign_without_submitted_labels_has_nothing_to_pair(
    gold, admin_user, matcher
):
    with pytest.raises(ValidationError, match="nothing to pair"):
        _draw(admin_user, "Empty", [gold], matcher)
    assert not CalibrationSet.objects.exists()


def test_only_admins_draw(labelled, physicians, matcher):
    with pytest.raises(PermissionDenied):
        _draw(physicians[0], "X", [labelled], matcher)


# Judgments, report, adoption --------------------------------------------------------


@pytest.fixture
def judged_set(labelled, admin_user, physicians, matcher):
    """Six pairs with the fixed cosines above; physician 0 judges them as SAME,
    physician 1 agrees except on the last pair, and a seventh pair is tied."""
    calibration_set = CalibrationSet.objects.create(
        name="Hand",
        model_name=matcher.model_name,
        tau_at_draw=0.5,
        band=0.15,
        created_by=admin_user,
    )
    calibration_set.campaigns.set([labelled])
    calibration_invite(
        admin=admin_user, calibration_set=calibration_set, judges=physicians
    )
    pairs = [
        CalibrationPair.objects.create(
            calibration_set=calibration_set,
            position=n,
            task="acute_problems",
            text_a=f"a{n}",
            text_b=f"b{n}",
            cosine=cosine,
            stratum="random",
        )
        for n, cosine in enumerate([*COSINES, 0.65])
    ]
    a, b = physicians
    for pair, same in zip(pairs, [*SAME, True]):
        calibration_judge(
            judge=a, calibration_set=calibration_set, pair_id=pair.pk, same=same
        )
    for pair, same in zip(pairs[:5], SAME[:5]):
        calibration_judge(
            judge=b, calibration_set=calibration_set, pair_id=pair.pk, same=same
        )
    calibration_judge(
        judge=b, calibration_set=calibration_set, pair_id=pairs[6].pk, same=False
    )
    return calibration_set


def test_judging_again_replaces_the_judgment(judged_set, physicians):
    pair = judged_set.pairs.get(position=0)
    calibration_judge(
        judge=physicians[0], calibration_set=judged_set, pair_id=pair.pk, same=False
    )
    judgment = CalibrationJudgment.objects.get(pair=pair, judge=physicians[0])
    assert judgment.same is False
    assert CalibrationJudgment.objects.filter(pair=pair).count() == 2


def test_bad_judgments_are_refused(judged_set, physicians, researcher):
    count = CalibrationJudgment.objects.count()
    with pytest.raises(ValidationError, match="same item or different"):
        calibration_judge(
            judge=physicians[0],
            calibration_set=judged_set,
            pair_id=judged_set.pairs.first().pk,
            same="maybe",
        )
    with pytest.raises(ValidationError, match="No such pair"):
        calibration_judge(
            judge=physicians[0], calibration_set=judged_set, pair_id=987654, same=True
        )
    with pytest.raises(PermissionDenied):
        calibration_judge(
            judge=researcher,
            calibration_set=judged_set,
            pair_id=judged_set.pairs.first().pk,
            same=True,
        )
    assert CalibrationJudgment.objects.count() == count


def test_report_sweeps_the_majority_judgments(judged_set, admin_user):
    report = calibration_report(admin=admin_user, calibration_set=judged_set)

    assert report["pairs"] == 7
    assert report["used"] == 6 and report["tied"] == 1 and report["judges"] == 2
    rows = {r["tau"]: r for r in report["rows"]}
    assert [r["tau"] for r in report["rows"]] == sweep_taus()
    assert rows[0.3]["f1"] == pytest.approx(0.75)
    assert rows[0.5]["f1"] == pytest.approx(2 / 3)
    assert rows[0.6]["accuracy"] == pytest.approx(5 / 6)
    assert rows[0.6]["f1"] == pytest.approx(0.8)
    # tau 0.4: 0.9 0.7 0.55 0.45 predicted -> TP 3, FP 1, FN 0: F1 6/7, the best.
    assert rows[0.4]["f1"] == pytest.approx(6 / 7)
    assert report["best"]["tau"] == 0.4


def test_report_counts_each_stratum_in_a_bounded_number_of_queries(
    judged_set, admin_user, django_assert_max_num_queries
):
    """Issue 35: the report reads the pairs and judgments as two queries of
    plain rows, whatever the set's size; its figures per stratum unchanged."""
    CalibrationPair.objects.create(
        calibration_set=judged_set,
        position=7,
        task="acute_problems",
        text_a="a7",
        text_b="b7",
        cosine=0.95,
        stratum="near_match",
    )
    with django_assert_max_num_queries(6):
        report = calibration_report(admin=admin_user, calibration_set=judged_set)

    assert report["pairs"] == 8 and report["unjudged"] == 1
    assert report["used"] == 6 and report["tied"] == 1 and report["judges"] == 2
    strata = {s["stratum"]: s for s in report["strata"]}
    assert strata["near_match"] == {
        "stratum": "near_match",
        "label": "Near match (just at or above tau)",
        "pairs": 1,
        "judged": 0,
        "same": 0,
    }
    assert strata["random"]["pairs"] == 7 and strata["random"]["judged"] == 6
    assert strata["random"]["same"] == sum(SAME) == report["positives"]
    assert strata["near_miss"]["pairs"] == 0


def test_adopting_a_tau_sets_the_models_tau_and_records_who_when_and_from_what(
    judged_set, admin_user, matcher
):
    MatcherModel.objects.update_or_create(
        name=matcher.model_name, defaults={"tau": 0.5}
    )

    adoption = tau_adopt(
        admin=admin_user, calibration_set=judged_set, tau="0.6", reason="Best F1"
    )

    model = MatcherModel.objects.get(name=matcher.model_name)
    assert model.tau == 0.6 and model.calibrated_at is not None
    assert "Hand" in model.notes and admin_user.username in model.notes
    assert adoption.adopted_by == admin_user and adoption.previous_tau == 0.5
    assert adoption.calibration_set == judged_set and adoption.reason == "Best F1"
    assert adoption.report["used"] == 6
    assert adoption.report["best"]["tau"] == 0.4
    # The next matcher of the model matches at the adopted tau.
    assert SemanticMatcher(matcher.model_name).tau == 0.6


@pytest.mark.parametrize("tau", ["0.62", "abc", "nan", None])
def test_a_tau_outside_the_report_is_refused_and_nothing_changes(
    judged_set, admin_user, matcher, tau
):
    with pytest.raises(ValidationError, match="report"):
        tau_adopt(admin=admin_user, calibration_set=judged_set, tau=tau)
    assert not TauAdoption.objects.exists()
    assert not MatcherModel.objects.filter(name=matcher.model_name).exists()


def test_a_set_without_judgments_cannot_calibrate(labelled, admin_user, matcher, judge):
    drawn = _draw(
        admin_user, "Unjudged", [labelled], matcher, per_stratum=2, judges=[judge]
    )
    with pytest.raises(ValidationError, match="No pair of this set has a judgment"):
        tau_adopt(admin=admin_user, calibration_set=drawn, tau=0.5)
    assert not TauAdoption.objects.exists()


def test_only_admins_adopt(judged_set, physicians):
    with pytest.raises(PermissionDenied):
        tau_adopt(admin=physicians[0], calibration_set=judged_set, tau=0.6)


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
    drawn = _draw(
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
