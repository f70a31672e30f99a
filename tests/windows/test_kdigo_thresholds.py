"""Each KDIGO AKI threshold (CLINICAL_CONCEPTS.md 4b and 4d) met exactly and
missed by 0.01 mg/dL, on hand-built creatinine series built so that only the
rule under test can decide the stage: moving any factor (1.5x, 2x, 3x of the
7-day low, the 0.3 mg/dL rise within 48 h, 4.0 mg/dL after a 48-h low of at
most 3.7 or with 1.5x, the 48-h and 7-day windows) or the RRT stage changes
a stage below."""

import pytest

from tests.windows.concept_tracks import tracks_for
from windows.concepts.synthetic import event

tracks = tracks_for(48)

# The measurement under test, in the hour ending at 11 h.
NOW = 10.5
HOUR = 11
# Earlier values: within 48 h of NOW, or only within its 7 days.
RECENT = NOW - 40
OLD = NOW - 100


def creat(hours, value):
    return event(hours, "labs", "creatinine", value)


def creatinine_stage(earlier, value):
    """The creatinine stage of ``value`` at NOW after ``earlier`` (hours, mg/dL)."""
    rows = [creat(hours, low) for hours, low in earlier] + [creat(NOW, value)]
    return tracks(rows).set_index("hour").at[HOUR, "aki_stage_creat"]


@pytest.mark.parametrize(
    ("earlier", "value", "stage"),
    [
        # Stage 1: 1.5 x the 7-day low (no value within 48 h).
        pytest.param([(OLD, 2.00)], 3.00, 1, id="1.5x-7d-met"),
        pytest.param([(OLD, 2.00)], 2.99, 0, id="1.5x-7d-missed"),
        # Stage 2: 2 x the 7-day low.
        pytest.param([(OLD, 1.00)], 2.00, 2, id="2x-7d-met"),
        pytest.param([(OLD, 1.00)], 1.99, 1, id="2x-7d-missed"),
        # Stage 3: 3 x the 7-day low (below 4.0 mg/dL).
        pytest.param([(OLD, 1.00)], 3.00, 3, id="3x-7d-met"),
        pytest.param([(OLD, 1.00)], 2.99, 2, id="3x-7d-missed"),
        # Stage 1: a rise of 0.3 mg/dL over the 48-h low (below 1.5x).
        pytest.param([(RECENT, 1.00)], 1.30, 1, id="0.3-48h-met"),
        pytest.param([(RECENT, 1.00)], 1.29, 0, id="0.3-48h-missed"),
        pytest.param([(RECENT, 2.50)], 2.80, 1, id="0.3-48h-met-higher"),
        pytest.param([(RECENT, 2.50)], 2.79, 0, id="0.3-48h-missed-higher"),
        # Stage 3: 4.0 mg/dL after a 48-h low of at most 3.7 (below 1.5x).
        pytest.param([(RECENT, 3.00)], 4.00, 3, id="4.0-met"),
        pytest.param([(RECENT, 3.00)], 3.99, 1, id="4.0-missed"),
        pytest.param([(RECENT, 3.70)], 4.00, 3, id="48h-low-3.7-met"),
        pytest.param([(RECENT, 3.71)], 4.01, 1, id="48h-low-3.7-missed"),
        # Stage 3: 4.0 mg/dL and 1.5 x the 7-day low, the 48-h low above 3.7
        # and less than 0.3 below.
        pytest.param([(OLD, 2.70), (RECENT, 3.80)], 4.05, 3, id="4.0-and-1.5x-met"),
        pytest.param([(OLD, 2.70), (RECENT, 3.80)], 4.04, 0, id="4.0-and-1.5x-missed"),
        # The baselines' windows: [t - 48 h, t) and [t - 7 d, t).
        pytest.param([(NOW - 48, 1.00)], 1.30, 1, id="48h-window-edge-in"),
        pytest.param([(NOW - 48.5, 1.00)], 1.30, 0, id="48h-window-edge-out"),
        pytest.param([(NOW - 168, 1.00)], 1.50, 1, id="7d-window-edge-in"),
        pytest.param([(NOW - 168.5, 1.00)], 1.50, 0, id="7d-window-edge-out"),
    ],
)
def test_each_creatinine_threshold_met_exactly_counts_and_missed_does_not(
    earlier, value, stage
):
    assert creatinine_stage(earlier, value) == stage


def test_a_running_crrt_circuit_is_stage_3_at_its_charting_and_between_chartings():
    crrt = [event(h, "crrt_therapy", "crrt:cvvhdf") for h in (2.5, 6.5)]
    frame = tracks([creat(1.5, 1.0), *crrt]).set_index("hour")

    # Hour 3 holds a charting, hours 4-7 are carried to the next one (at most
    # 6 h later); creatinine and urine alone say stage 0.
    assert frame.loc[[2, 3, 4, 5, 7], "aki_stage_creat"].fillna(0).max() == 0
    assert frame.loc[[3, 4, 5, 6, 7], "crrt_active"].tolist() == [1] * 5
    assert frame.loc[[3, 4, 5, 6, 7], "aki_stage"].tolist() == [3] * 5
    assert frame.at[2, "aki_stage"] == 0


def test_without_crrt_the_same_stay_is_stage_0():
    frame = tracks([creat(1.5, 1.0)]).set_index("hour")
    assert frame.loc[2:8, "aki_stage"].fillna(0).max() == 0
