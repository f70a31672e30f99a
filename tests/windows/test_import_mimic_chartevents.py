"""The MIMIC-IV importer's chartevents: items mapped to CLIF categories and
converted, the text items CLIF keeps in tables of their own, the items that
change another row (temperature site, blood gas specimen), and the Arrow reader
reading what the pandas reader reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from tests.windows.mimic_files import (
    A1,
    A2,
    IMPORTED_ROWS,
    _t,
    chart,
    event,
    mimic_tables,
    write_mimic,
)
from windows.event_fields import EVENT_VALUE_FIELDS
from windows.importers.mimic import ChartEventsStep, EventStep, mimic_import
from windows.models import Event


@pytest.mark.django_db
def test_chartevents_are_mapped_to_clif_categories_and_converted(mimic_dir):
    mimic_import(directory=mimic_dir)

    hr = event("chartevents", category="heart_rate", admission__source_id=str(A1))
    assert (hr.domain, hr.kind, hr.name, hr.value_num, hr.unit) == (
        "vitals",
        "observation",
        "Heart Rate",
        88,
        "bpm",
    )
    assert hr.source_key == "row:1"
    assert event("chartevents", category="map").value_num == 72
    temp = event("chartevents", category="temp_c")
    assert temp.value_num == pytest.approx(38.0) and temp.unit == "°C"
    verbal = event("chartevents", category="gcs_verbal")
    assert (verbal.domain, verbal.value_num, verbal.value_text) == (
        "patient_assessments",
        1,
        "No Response-ETT",
    )
    assert event("chartevents", category="gcs_eye").value_num == 4
    assert event("chartevents", category="gcs_motor").value_num == 6
    device = event("chartevents", category="IMV")
    assert (device.domain, device.name, device.kind) == (
        "respiratory_support",
        "Endotracheal tube",  # named by its text, as CLIF's device_name
        "action",
    )
    assert device.value_num is None and device.value_text == ""
    assert event("chartevents", category="fio2_set").value_num == pytest.approx(0.5)


# Text items CLIF keeps in their own tables: categorized and named by their text.
BEDSIDE_TEXT_ITEMS = [
    # itemid, label, charted text -> domain, category, name
    (224093, "Position", "Prone", "position", "prone", "Prone"),
    (224093, "Position", "Left Side", "position", "not_prone", "Left Side"),
    (223758, "Code Status", "DNR / DNI", "code_status", "DNR/DNI", "DNR / DNI"),
    (227290, "CRRT mode", "CVVHDF", "crrt_therapy", "crrt:cvvhdf", "CVVHDF"),
    (
        229314,
        "Ventilator Mode (Hamilton)",
        "ASV",
        "respiratory_support",
        "mode:Other",
        "ASV",
    ),
    (
        227577,
        "BiPap Mode",
        "Spontaneous (S)",
        "respiratory_support",
        "mode:Other",
        "Spontaneous (S)",
    ),
    (
        223849,
        "Ventilator Mode",
        "CMV/ASSIST",
        "respiratory_support",
        "mode:Assist Control-Volume Control",
        "CMV/ASSIST",
    ),
    (
        224056,
        "Braden Activity",
        "Bedfast",
        "patient_assessments",
        "braden_activity",
        "Braden Activity",
    ),
    (
        228300,
        "CAM-ICU MS Change",
        "No",
        "patient_assessments",
        "cam_mental",
        "CAM-ICU MS Change",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_position_code_status_crrt_modes_and_assessments_are_in_their_clif_tables(
    tmp_path, monkeypatch, reader
):
    tables = mimic_tables()
    for i, (itemid, label, text, *_rest) in enumerate(BEDSIDE_TEXT_ITEMS):
        tables["icu/chartevents"].append(
            chart(A1, itemid, f"2151-03-02 {10 + i}:00:00", text)
        )
        tables["icu/d_items"].append(
            {"itemid": itemid, "label": label, "param_type": "Text"}
        )
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    for i, (*_item, domain, category, name) in enumerate(BEDSIDE_TEXT_ITEMS):
        found = event("chartevents", time=_t(f"2151-03-02 {10 + i}:00"))
        assert (found.domain, found.category, found.name) == (domain, category, name)
        if domain != "patient_assessments":
            assert found.value_text == ""


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_temperature_site_goes_onto_its_temperature_and_labs_charted_take_storetime(
    tmp_path, monkeypatch, reader
):
    tables = mimic_tables()
    tables["icu/chartevents"] += [
        chart(A1, 224642, "2151-03-01 13:00:00", "Oral"),  # the 100.4 °F of row 3
        chart(A1, 224642, "2151-03-01 15:00:00", "Axillary"),  # no temperature
        dict(
            chart(A1, 220224, "2151-03-01 13:10:00", "88", 88, "mmHg"),
            storetime="2151-03-01 13:25:00",
        ),  # Arterial O2 pressure
    ]
    tables["icu/d_items"] += [
        {"itemid": 224642, "label": "Temperature Site", "param_type": "Text"},
        {"itemid": 220224, "label": "Arterial O2 pressure", "param_type": "Numeric"},
    ]
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    summary = mimic_import(directory=write_mimic(tmp_path / "m", tables))

    temp = event("chartevents", category="temp_c")
    assert (temp.value_num, temp.value_text) == (pytest.approx(38.0), "Oral")
    assert not Event.objects.filter(category="temp_site").exists()
    assert "1 Temperature Site rows (224642) without a temperature" in str(summary)
    po2 = event("chartevents", category="po2_arterial")
    assert po2.time == _t("2151-03-01 13:25")  # its result, as labevents' storetime
    assert (po2.value_text, po2.end_time) == ("arterial", None)


@pytest.mark.django_db
def test_a_blood_gas_takes_its_specimen_from_its_collection(tmp_path):
    """The pO2 of a gas whose pH is charted as venous is venous (no P/F from it);
    a gas whose Specimen Type says ART. is arterial."""
    tables = mimic_tables()
    gas = dict(
        tables["hosp/labevents"][0],
        charttime="2151-03-02 09:00:00",
        storetime="2151-03-02 09:05:00",
        valueuom="mm Hg",
    )
    tables["hosp/labevents"] += [
        dict(gas, labevent_id=11, itemid=50821, value="35", valuenum=35),
        dict(
            gas,
            labevent_id=12,
            charttime="2151-03-02 10:00:00",
            itemid=50821,
            value="90",
            valuenum=90,
        ),
        dict(
            gas,
            labevent_id=13,
            charttime="2151-03-02 10:00:00",
            itemid=52033,
            value="ART.",
            valuenum="",
        ),
    ]
    tables["icu/chartevents"].append(
        chart(A1, 220274, "2151-03-02 09:00:00", "7.31", 7.31)  # PH (Venous)
    )
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    assert event("labevents", source_key="11").value_text == "venous"
    assert event("labevents", source_key="12").value_text == "arterial"
    assert event("labevents", source_key="13").value_text == "ART."
    assert not Event.objects.filter(domain="labs", end_time__isnull=False).exists()


def chart_events() -> list[tuple]:
    return sorted(
        Event.objects.filter(source_table="chartevents").values_list(
            "admission__source_id",
            "time",
            "end_time",
            *EVENT_VALUE_FIELDS,
            "source_key",
        )
    )


def chart_events_both_ways(directory: Path, monkeypatch) -> tuple[list, list]:
    """chartevents imported by ChartEventsStep (Arrow), then, in a clean
    database, by the general pandas path."""
    with transaction.atomic():
        mimic_import(directory=directory)
        arrow = chart_events()
        transaction.set_rollback(True)
    monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)
    mimic_import(directory=directory)
    return arrow, chart_events()


@pytest.mark.django_db
def test_chartevents_read_by_arrow_are_those_of_the_pandas_reader(
    tmp_path, monkeypatch
):
    """The Arrow reader and transform of chartevents give the events of the
    pandas path, row for row, on the cases that differ between the two
    libraries: missing-value spellings, quoted commas and line breaks, a unit
    beyond its column's length, a device with trailing spaces, rows of another
    admission or without one, times out of order, fractional seconds."""
    tables = mimic_tables()
    tables["icu/chartevents"] += [
        chart(A1, 220045, "2151-03-01 12:00:00", "NA", "", "bpm"),
        chart(A1, 229999, "2151-03-01 12:30", '"quoted, with\na line break"', ""),
        chart(A1, 229998, "2151-03-01 12:30:00", "n/a", "NaN", "x" * 40),
        chart(A1, 226732, "2151-03-01 12:45:00", "Nasal cannula  ", ""),
        chart(A1, 223835, "2151-03-01 11:00:00", "0.4", "0.4"),
        chart(A2, 220045, "2161-05-01 10:30:00.5", "null", "", ""),
        chart("", 220045, "2151-03-01 12:00:00", "90", 90, "bpm"),
    ]
    arrow, pandas = chart_events_both_ways(
        write_mimic(tmp_path / "m", tables), monkeypatch
    )

    assert len(arrow) == IMPORTED_ROWS["chartevents"] + 6
    assert arrow == pandas


def test_the_arrow_reader_reads_as_missing_exactly_what_pandas_does():
    from pandas._libs.parsers import STR_NA_VALUES

    from windows.importers.base import _PANDAS_NA

    assert set(_PANDAS_NA) == set(STR_NA_VALUES)
