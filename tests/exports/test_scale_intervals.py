"""Prediction-powered intervals of a Scale submission (issue 33): the figures
stored with its scores, shown on its page and served by the API are those of
``evaluation.ppi`` on the per-window vectors, the computation the coverage
benchmark (benchmarks/ppi_coverage_bench.py) measures.

The tiny release (see test_scoring) is labelled by the Oracle; its validation
campaign holds a physician consensus on three of its four windows:
  a0 stable (Oracle: deteriorating), problems {AKI}
  a1 stable, no items
  b0 improving, problems {Delirium}
c0 has none. Predictions (k = 2): a0 deteriorating [Pneumonia, Septic shock],
a1 improving [Pneumonia], b0 improving [Delirium], c0 none.
"""

from __future__ import annotations

import numpy as np
import pytest
from rest_framework.test import APIClient

from evaluation.ppi import (
    MACRO_F1,
    MEAN,
    RATIO,
    Design,
    score_interval,
)
from evaluation.ppi_vectors import status_cells, window_values
from exports.building import json_safe
from exports.services import token_create

from .helpers import make_consensus, scored_submission

pytestmark = pytest.mark.django_db


def _by_hand():
    """The benchmark's computation on vectors written out by hand, windows in
    the release's order a0, a1, b0, c0."""
    labelled = np.array([True, True, True, False])
    # Status codes: improving 0, stable 1, deteriorating 2, none -1.
    predicted = [2, 0, 0, -1]
    f_status = status_cells([2, 1, 0, 1], predicted)
    y_status = status_cells([1, 1, 0, -1], predicted)
    # Problems Hit@2: a0 [Pneumonia, Septic shock] hits the Oracle's {Septic
    # shock, AKI} but not the physicians' {AKI}; a1 has no reference items; b0
    # hits both; c0 has no prediction (0 against the Oracle, no consensus).
    f_hit = window_values([1.0, None, 1.0, 0.0])
    y_hit = window_values([0.0, None, 1.0, None])
    # HRR@2: a0 (stay A) recommends the Oracle's red flag Fluid bolus in its
    # top 2 (1/2), b0 (stay B) its Benzodiazepines (1/1); the physicians named
    # no red flag. Two stays of one counted window each: weights 4 / (2 * 1).
    f_hrr = np.array([[2 * 0.5], [0.0], [2 * 1.0], [0.0]])
    y_hrr = np.zeros((4, 1))
    return {
        "actions_hrr_at_k": json_safe(
            score_interval(Design.of(f_hrr, y_hrr, labelled), MEAN).as_dict()
        ),
        "status_macro_f1": json_safe(
            score_interval(Design.of(f_status, y_status, labelled), MACRO_F1).as_dict()
        ),
        "problems_hit_at_k": json_safe(
            score_interval(Design.of(f_hit, y_hit, labelled), RATIO).as_dict()
        ),
    }


def test_stored_intervals_are_the_benchmarks_computation(
    researcher, rectified_release, tiny_stays
):
    scored = scored_submission(researcher, rectified_release, tiny_stays["windows"])
    intervals = scored.scores["intervals"]
    assert intervals["n_rectifier_windows"] == 3
    assert intervals["n_windows"] == 4
    assert intervals["inclusion"] == "uniform"
    expected = _by_hand()
    for metric, figures in expected.items():
        assert intervals["figures"][metric] == pytest.approx(figures, nan_ok=True)
    # The Oracle-only figure is the plain score against the Oracle's labels.
    assert intervals["figures"]["status_macro_f1"]["oracle_only"] == pytest.approx(
        scored.scores["overall"]["status_macro_f1"]
    )
    hrr = intervals["figures"]["actions_hrr_at_k"]
    assert hrr["oracle_only"] == pytest.approx(
        scored.scores["overall"]["actions_hrr_at_k"]
    )
    assert hrr["gold_only"] == 0.0
    hit = intervals["figures"]["problems_hit_at_k"]
    assert hit["gold_only"] == pytest.approx(1 / 2)
    assert hit["oracle_only"] == pytest.approx(2 / 3)


def test_the_api_and_the_page_show_the_stored_intervals(
    client, researcher, rectified_release, tiny_stays
):
    scored = scored_submission(researcher, rectified_release, tiny_stays["windows"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=researcher).key}")
    body = api.get(f"/api/v1/submissions/{scored.pk}/").json()
    assert body["scores"]["intervals"] == scored.scores["intervals"]
    expected = _by_hand()["status_macro_f1"]
    client.force_login(researcher)
    page = client.get(f"/releases/submissions/{scored.pk}/").content.decode()
    assert "Against physicians: 95 % confidence intervals" in page
    row = page.split('data-metric="status_macro_f1"')[1].split("</tr>")[0]
    assert f'data-estimate="{expected["estimate"]}"' in row
    assert f'data-lower="{expected["lower"]}"' in row
    assert f'data-upper="{expected["upper"]}"' in row
    scored.public = True
    scored.save(update_fields=["public"])
    board = client.get(
        f"/releases/{rectified_release.pk}/leaderboard/"
    ).content.decode()
    cell = board.split('data-interval="status_macro_f1">')[1].split("</span>")[0]
    assert cell == (
        f"PPI {expected['estimate']:.3f} "
        f"[{expected['lower']:.3f}, {expected['upper']:.3f}]"
    )


def test_a_scale_release_without_physician_windows_has_no_intervals(
    researcher, tiny_release, tiny_stays
):
    scored = scored_submission(researcher, tiny_release, tiny_stays["windows"])
    assert scored.scores["intervals"] is None


def test_the_manifest_and_data_card_record_the_rectifier_set(
    admin_user, rectified_release, tiny_stays, settings
):
    from pathlib import Path

    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.services import release_create

    # Built after the consensus exists: a second version of the same run.
    release = release_build(
        release=release_create(
            user=admin_user,
            kind=ReleaseKind.SCALE,
            oracle_run=rectified_release.oracle_run,
        )
    )
    w = tiny_stays["windows"]
    section = release.manifest["rectifier"]
    assert (
        section["gold_campaign_id"] == rectified_release.validation_report.campaign_id
    )
    assert section["n_windows"] == 3
    assert section["windows"] == [
        {"window_id": window.pk, "inclusion_probability": 3 / 4}
        for window in sorted((w["A"][0], w["A"][1], w["B"][0]), key=lambda x: x.pk)
    ]
    card = (
        Path(settings.REALICU_RELEASES_DIR) / release.directory / "DATACARD.md"
    ).read_text()
    assert "## Score intervals" in card
    assert "3 windows of this release with a physician consensus" in card


def test_stored_draw_probabilities_weight_the_gold_windows(
    researcher, rectified_release, tiny_stays
):
    from oracle.models import GoldInclusion

    w = tiny_stays["windows"]
    campaign = rectified_release.validation_report.campaign
    probabilities = {w["A"][0]: 0.5, w["A"][1]: 1.0, w["B"][0]: 0.25}
    GoldInclusion.objects.bulk_create(
        GoldInclusion(
            campaign=campaign,
            window=window,
            uncertainty=0.0,
            probability=p,
            floor=0.7,
            source="test",
        )
        for window, p in probabilities.items()
    )
    scored = scored_submission(researcher, rectified_release, w)
    intervals = scored.scores["intervals"]
    assert intervals["inclusion"] == "stored draw probabilities"
    labelled = np.array([True, True, True, False])
    pi = np.array([0.5, 1.0, 0.25, np.nan])
    f_hit = window_values([1.0, None, 1.0, 0.0])
    y_hit = window_values([0.0, None, 1.0, None])
    expected = json_safe(
        score_interval(Design.of(f_hit, y_hit, labelled, pi), RATIO).as_dict()
    )
    assert intervals["figures"]["problems_hit_at_k"] == pytest.approx(
        expected, nan_ok=True
    )
    # Weights 1 / pi: b0's hit counts four times, a0's miss twice.
    assert expected["gold_only"] == pytest.approx(4 / 6)


def test_an_active_draw_counts_its_pilot_and_gives_lam_its_strata(
    admin_user, client, researcher, rectified_release, tiny_stays, monkeypatch
):
    """The validation campaign was drawn actively: a0, a1, b0 by the draw, c0
    labelled before it in another campaign (the pilot: stable, {Hypokalemia}).
    Stored levels 0, 1, 3, 2 put a0, a1, b0, c0 in lam's strata 0, 1, 2, 2.
    With strata of one Gold window allowed (the tiny release has four), the
    stored intervals, the API's and the page's are evaluation.ppi's with those
    strata, the stored probabilities and c0 among the Gold windows; the
    manifest records every window's level."""
    from annotation.models import Campaign
    from evaluation.ppi_active import lam_strata
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.scoring_ppi import LAM_BY_LEVEL
    from exports.services import release_create
    from oracle.models import GoldInclusion, GoldInclusionPhase

    monkeypatch.setattr("evaluation.ppi.MIN_STRATUM_GOLD", 1)
    w = tiny_stays["windows"]
    campaign = rectified_release.validation_report.campaign
    earlier = Campaign.objects.create(name="earlier", created_by=admin_user)
    make_consensus(
        campaign=earlier, window=w["C"][0], status="stable", problems=["Hypokalemia"]
    )
    draw = {
        w["A"][0]: (0, GoldInclusionPhase.ACTIVE, 0.5),
        w["A"][1]: (1, GoldInclusionPhase.ACTIVE, 0.8),
        w["B"][0]: (3, GoldInclusionPhase.ACTIVE, 0.4),
        w["C"][0]: (2, GoldInclusionPhase.PILOT, 0.6),
    }
    GoldInclusion.objects.bulk_create(
        GoldInclusion(
            campaign=campaign,
            window=window,
            uncertainty=level / 3,
            level=level,
            probability=p,
            pilot_probability=0.25,
            phase=phase,
            floor=0.2,
            source="test",
        )
        for window, (level, phase, p) in draw.items()
    )
    scored = scored_submission(researcher, rectified_release, w)
    intervals = scored.scores["intervals"]
    assert intervals["n_rectifier_windows"] == 4
    assert intervals["lam_strata"] == LAM_BY_LEVEL
    # Windows a0, a1, b0, c0: c0's consensus is stable (code 1), with no
    # prediction; its problems {Hypokalemia} are missed (0).
    labelled = np.ones(4, dtype=bool)
    pi = np.array([0.5, 0.8, 0.4, 0.6])
    strata = lam_strata([0, 1, 3, 2])
    assert strata.tolist() == [0, 1, 2, 2]
    predicted = [2, 0, 0, -1]
    f_status = status_cells([2, 1, 0, 1], predicted)
    y_status = status_cells([1, 1, 0, 1], predicted)
    f_hit = window_values([1.0, None, 1.0, 0.0])
    y_hit = window_values([0.0, None, 1.0, 0.0])
    expected = {
        "status_macro_f1": json_safe(
            score_interval(
                Design.of(f_status, y_status, labelled, pi, strata=strata), MACRO_F1
            ).as_dict()
        ),
        "problems_hit_at_k": json_safe(
            score_interval(
                Design.of(f_hit, y_hit, labelled, pi, strata=strata), RATIO
            ).as_dict()
        ),
    }
    for metric, figures in expected.items():
        assert isinstance(figures["lam"], list) and len(figures["lam"]) == 3
        assert intervals["figures"][metric] == pytest.approx(figures, nan_ok=True)
    # One lam over the same windows is another interval: the strata are used.
    one = score_interval(Design.of(f_status, y_status, labelled, pi), MACRO_F1)
    assert one.as_dict()["lower"] != pytest.approx(expected["status_macro_f1"]["lower"])

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=researcher).key}")
    body = api.get(f"/api/v1/submissions/{scored.pk}/").json()
    assert body["scores"]["intervals"]["figures"]["status_macro_f1"] == (
        pytest.approx(expected["status_macro_f1"], nan_ok=True)
    )
    client.force_login(researcher)
    page = client.get(f"/releases/submissions/{scored.pk}/").content.decode()
    row = page.split('data-metric="status_macro_f1"')[1].split("</tr>")[0]
    assert f'data-estimate="{expected["status_macro_f1"]["estimate"]}"' in row
    assert f'data-lower="{expected["status_macro_f1"]["lower"]}"' in row

    release = release_build(
        release=release_create(
            user=admin_user,
            kind=ReleaseKind.SCALE,
            oracle_run=rectified_release.oracle_run,
        )
    )
    section = release.manifest["rectifier"]
    assert section["lam_strata"] == LAM_BY_LEVEL
    assert section["n_windows"] == 4
    assert section["window_levels"] == {
        str(window.pk): level for window, (level, _, _) in draw.items()
    }
    assert {x["window_id"]: x["inclusion_probability"] for x in section["windows"]} == {
        window.pk: p for window, (_, _, p) in draw.items()
    }
