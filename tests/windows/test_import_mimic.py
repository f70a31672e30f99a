"""The MIMIC-IV importer, on the small files of tests/windows/mimic_files.py: what
is imported from each table (patients, admissions, stays, outcomes, labs,
infusions, outputs, procedures, cultures, transfers) and what its summary counts."""

from __future__ import annotations

import pytest

from tests.windows.mimic_files import (
    A1,
    A2,
    A_NO_ICU,
    IMPORTED_ROWS,
    _t,
    chart,
    event,
    event_counts,
    mimic_tables,
    write_mimic,
)
from windows.importers.mimic import ChartEventsStep, EventStep, mimic_import
from windows.models import (
    Admission,
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    Patient,
    Stay,
)


@pytest.mark.django_db
def test_import_creates_patients_admissions_stays_and_every_event_row(mimic_dir):
    summary = mimic_import(directory=mimic_dir)

    assert (
        Patient.objects.count(),
        Admission.objects.count(),
        Stay.objects.count(),
    ) == (2, 2, 2)
    assert (summary.patients, summary.admissions, summary.stays) == (2, 2, 2)
    assert event_counts() == IMPORTED_ROWS
    assert summary.events == IMPORTED_ROWS
    assert not Admission.objects.filter(source_id=str(A_NO_ICU)).exists()


@pytest.mark.django_db
def test_patients_admissions_and_stays_carry_demographics_outcome_and_diagnosis(
    mimic_dir,
):
    mimic_import(directory=mimic_dir)

    survivor = Patient.objects.get(source="mimic", source_id="10001")
    assert (survivor.sex, survivor.age, survivor.death_time) == ("Female", 61, None)
    assert survivor.pseudo_id.startswith("P") and "10001" not in survivor.pseudo_id
    died = Patient.objects.get(source_id="10002")
    assert died.age == 71
    assert died.death_time.isoformat() == "2161-05-05T09:00:00+00:00"

    adm = Admission.objects.get(source_id=str(A1))
    assert adm.admit_time.isoformat() == "2151-03-01T10:00:00+00:00"
    assert (adm.admission_type, adm.discharge_disposition, adm.age_at_admission) == (
        "ed",
        "Home",
        61,
    )
    assert adm.diagnoses == [
        {
            "code": "A419",
            "version": 10,
            "rank": 1,
            "title": "Sepsis, unspecified organism",
        },
        {"code": "N179", "version": 10, "rank": 2, "title": ""},
    ]
    assert Admission.objects.get(source_id=str(A2)).discharge_disposition == "Expired"

    stay = Stay.objects.get(source_id="30001")
    assert stay.source_ids == {
        "stay_id": 30001,
        "first_careunit": "Medical Intensive Care Unit (MICU)",
        "last_careunit": "Medical Intensive Care Unit (MICU)",
    }
    assert stay.care_unit == "Medical Intensive Care Unit (MICU)"
    assert (stay.hospital_outcome, stay.disease_group, stay.diagnosis_code) == (
        "survived",
        DiseaseGroup.SEPSIS,
        "A419",
    )
    assert stay.admission_diagnosis == "A41.9 Sepsis, unspecified organism (ICD-10-CM)"
    other = Stay.objects.get(source_id="30002")
    assert (other.hospital_outcome, other.disease_group) == (
        "died",
        DiseaseGroup.CARDIOVASCULAR,
    )


@pytest.mark.django_db
def test_outcome_events_mark_icu_discharge_hospital_discharge_and_death(mimic_dir):
    mimic_import(directory=mimic_dir)

    outcomes = Event.objects.filter(kind=EventKind.OUTCOME, domain=Domain.OUTCOME)
    assert sorted(outcomes.values_list("category", "source_key")) == [
        ("death", f"death:{A2}"),
        ("hospital_discharge", f"admission:{A1}"),
        ("hospital_discharge", f"admission:{A2}"),
        ("icu_discharge", "stay:30001"),
        ("icu_discharge", "stay:30002"),
    ]
    death = outcomes.get(category="death")
    assert death.time.isoformat() == "2161-05-05T09:00:00+00:00"


@pytest.mark.django_db
def test_unmapped_item_is_kept_with_its_d_items_label(mimic_dir):
    mimic_import(directory=mimic_dir)

    item = event("chartevents", name="Skin Care Site")
    assert (item.category, item.domain, item.value_text, item.source_key) == (
        "",
        "other",
        "left side",
        "row:9",
    )


@pytest.mark.django_db
def test_summary_counts_the_rows_of_unknown_itemids_and_admissions_left_out(mimic_dir):
    summary = mimic_import(directory=mimic_dir)

    notes = "\n".join(summary.notes)
    assert (
        "chartevents: 1 rows of 1 unknown itemids (not in the mapping) imported under "
        "their label without a CLIF category: 229999 Skin Care Site (1 rows)"
    ) in notes
    assert "hosp/admissions: 1 admissions without an ICU stay not imported" in notes
    assert summary.dropped["hosp/transfers"] == {
        "discharge rows (the admissions' hospital-discharge outcome events say it)": 1
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "reader, batch_stays", [("arrow", None), ("pandas", None), ("arrow", 1)]
)
def test_summary_counts_every_row_left_out_or_merged_and_the_events_stored(
    tmp_path, monkeypatch, reader, batch_stays
):
    """Issue 30, item 6: a row that is no event of its own is counted by
    reason; an exact duplicate row is imported once; the summary's events are
    those stored. Batches of one stay route the rows (mimic.routing) first."""
    tables = mimic_tables()
    heart_rate = chart(A1, 220045, "2151-03-01 13:00:00", "88", 88, "bpm")
    tables["icu/chartevents"] += [
        dict(heart_rate),  # an exact duplicate of the first row
        chart(A1, 224642, "2151-03-01 13:00:00", "Oral"),  # onto the 100.4 °F
        chart(A1, 224642, "2151-03-01 15:00:00", "Axillary"),  # no temperature
    ]
    tables["icu/d_items"].append(
        {"itemid": 224642, "label": "Temperature Site", "param_type": "Text"}
    )
    creatinine = tables["hosp/labevents"][0]
    tables["hosp/labevents"] += [
        dict(creatinine),  # an exact duplicate, labevent_id included
        {  # no hadm_id, a patient without any admission
            "labevent_id": 6,
            "subject_id": 10003,
            "itemid": 50912,
            "charttime": "2170-01-01 06:00:00",
            "value": "0.8",
            "valuenum": 0.8,
            "valueuom": "mg/dL",
        },
    ]
    if reader == "pandas":
        monkeypatch.setattr(ChartEventsStep, "_arrow_frames", EventStep.frames)

    summary = mimic_import(
        directory=write_mimic(tmp_path / "m", tables), batch_stays=batch_stays
    )

    not_imported = (
        "rows of admissions not imported (without an ICU stay, outside the cohort, "
        "or imported before)"
    )
    duplicate = (
        "exact duplicates of an earlier row (equal in every column read), imported once"
    )
    assert summary.dropped["icu/chartevents"] == {
        not_imported: 1,  # the admission without an ICU stay
        duplicate: 1,
        "Temperature Site rows (224642) merged into the temperature charted at "
        "their time (its site)": 1,
        "Temperature Site rows (224642) without a temperature at their time": 1,
    }
    assert summary.dropped["hosp/labevents"] == {
        not_imported: 1,
        duplicate: 1,
        "rows without hadm_id of patients not imported": 1,
        "rows without hadm_id whose time falls in no admission of their patient "
        "imported": 1,  # labevent 3, years before admission A1
    }
    assert summary.events == event_counts() == IMPORTED_ROWS
    assert summary.total_events == Event.objects.count()
    assert (
        Event.objects.filter(category="heart_rate", admission__source_id=A1).count()
        == 1
    )
    assert Event.objects.filter(source_table="labevents", source_key="1").count() == 1
    assert "source rows not imported as events of their own: 9" in str(summary)
    assert summary.as_dict()["dropped"] == summary.dropped


@pytest.mark.django_db
def test_unmapped_inputevents_are_observations(tmp_path):
    tables = mimic_tables()
    tables["icu/inputevents"].append(
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "stay_id": 30001,
            "starttime": "2151-03-01 15:00:00",
            "endtime": "2151-03-01 15:01:00",
            "itemid": 226452,
            "amount": 240,
            "amountuom": "ml",
            "orderid": 9100,
            "linkorderid": 9100,
            "statusdescription": "FinishedRunning",
        }
    )
    tables["icu/d_items"].append(
        {"itemid": 226452, "label": "PO Intake", "linksto": "inputevents"}
    )
    mimic_import(directory=write_mimic(tmp_path / "mimic", tables))

    intake = event("inputevents", name="PO Intake")
    assert (intake.category, intake.kind) == ("", "observation")
    # a mapped drug of the same file is still an action
    assert event("inputevents", category="vasopressin", value_text="start").kind == (
        "action"
    )


@pytest.mark.django_db
def test_procedure_codes_are_coded_records_at_their_date(tmp_path):
    tables = mimic_tables()
    tables["hosp/procedures_icd"] = [
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "seq_num": 1,
            "chartdate": "2151-03-02",
            "icd_code": "5A1955Z",
            "icd_version": 10,
        },
    ]
    tables["hosp/hcpcsevents"] = [
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "chartdate": "2151-03-03",
            "hcpcs_cd": "99291",
            "seq_num": 1,
            "short_description": "Critical care",
        },
    ]
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    coded = Event.objects.filter(kind="coded").order_by("time")
    assert list(
        coded.values_list("time", "kind", "category", "name", "value_text")
    ) == [
        (_t("2151-03-02 00:00"), "coded", "ICD10PCS", "ICD10PCS 5A1955Z", "5A1955Z"),
        (_t("2151-03-03 00:00"), "coded", "CPT", "CPT 99291", "99291"),
    ]


@pytest.mark.django_db
def test_labs_use_result_time_and_labs_without_hadm_id_join_their_admission(mimic_dir):
    mimic_import(directory=mimic_dir)

    creatinine = event("labevents", category="creatinine")
    assert (creatinine.value_num, creatinine.unit, creatinine.source_key) == (
        1.2,
        "mg/dL",
        "1",
    )
    assert creatinine.time.isoformat() == "2151-03-02T07:10:00+00:00"  # storetime
    lactate = event("labevents", category="lactate")
    assert lactate.admission.source_id == str(A1) and lactate.value_num == 4.1
    assert lactate.source_key == "2"
    assert not Event.objects.filter(source_table="labevents", source_key="3").exists()
    calcium = event("labevents", category="calcium_ionized")  # mmol/L x4 -> mg/dL
    assert calcium.value_num == pytest.approx(4.4) and calcium.unit == "mg/dL"


@pytest.mark.django_db
def test_infusions_become_mar_records_per_order_with_rates_as_in_section_5(mimic_dir):
    """An order's rows (one linkorderid) become CLIF's MAR records: a start, a
    dose change where the next row takes over with its rate, a stop (0) at the
    end of the last row; rates converted as CLINICAL_CONCEPTS.md section 5 says."""
    mimic_import(directory=mimic_dir)

    norepi = Event.objects.filter(source_table="inputevents", category="norepinephrine")
    assert sorted(
        norepi.values_list(
            "time", "value_text", "value_num", "unit", "order_id", "source_key"
        )
    ) == [
        (_t("2151-03-01 14:00"), "start", 0.1, "mcg/kg/min", "9001", "9001"),
        (
            _t("2151-03-01 16:00"),
            "dose_change",
            pytest.approx(0.2),
            "mcg/kg/min",
            "9001",
            "9002",
        ),  # mg/kg/min x1000
        (_t("2151-03-01 18:00"), "stop", 0.0, "mcg/kg/min", "9001", "9002:stop"),
    ]
    assert set(norepi.values_list("domain", flat=True)) == {
        "medication_admin_continuous"
    }
    assert not norepi.filter(end_time__isnull=False).exists()
    vaso = Event.objects.filter(source_table="inputevents", category="vasopressin")
    assert sorted(vaso.values_list("value_text", "value_num", "unit")) == [
        ("start", pytest.approx(2.4), "units/hour"),  # units/min x60
        ("stop", 0.0, "units/hour"),
    ]
    bolus = event("inputevents", category="sodium chloride")
    assert (bolus.domain, bolus.value_num, bolus.unit, bolus.value_text) == (
        "medication_admin_intermittent",
        500,
        "mL",
        "given",
    )


@pytest.mark.django_db
def test_a_paused_infusion_restarted_at_once_is_going_and_after_a_gap_starts_again(
    tmp_path,
):
    tables = mimic_tables()
    base = dict(
        tables["icu/inputevents"][0],
        itemid=221906,
        linkorderid=7000,
        rateuom="mcg/kg/min",
    )
    tables["icu/inputevents"] = [
        dict(
            base,
            orderid=7001,
            starttime="2151-03-01 13:00:00",
            endtime="2151-03-01 14:00:00",
            rate=0.1,
            statusdescription="Paused",
        ),
        dict(
            base,
            orderid=7002,
            starttime="2151-03-01 14:00:00",
            endtime="2151-03-01 15:00:00",
            rate=0.1,
            statusdescription="Paused",
        ),
        dict(
            base,
            orderid=7003,
            starttime="2151-03-01 16:00:00",
            endtime="2151-03-01 17:00:00",
            rate=0.3,
            statusdescription="Stopped",
        ),
    ]
    mimic_import(directory=write_mimic(tmp_path / "m", tables))

    records = Event.objects.filter(source_table="inputevents").order_by("time", "id")
    assert list(records.values_list("time", "value_text", "value_num")) == [
        (_t("2151-03-01 13:00"), "start", 0.1),
        (_t("2151-03-01 14:00"), "going", 0.1),
        (_t("2151-03-01 15:00"), "stop", 0.0),
        (_t("2151-03-01 16:00"), "start", pytest.approx(0.3)),
        (_t("2151-03-01 17:00"), "stop", 0.0),
    ]


@pytest.mark.django_db
def test_output_procedures_medications_cultures_and_transfers_are_mapped(mimic_dir):
    mimic_import(directory=mimic_dir)

    urine = Event.objects.filter(source_table="outputevents")
    assert set(urine.values_list("domain", "category", "kind")) == {
        ("output", "indwelling_urinary_catheter", "observation")
    }
    line = event("procedureevents", category="arterial_line")
    assert (line.kind, line.domain, line.value_text, line.source_key) == (
        "action",
        "patient_procedures",
        "Left Radial",
        "8001",
    )
    assert line.end_time.isoformat() == "2151-03-03T12:30:00+00:00"
    intubation = event("procedureevents", category="intubation")
    # a timed procedure is a decision, though its domain's other records are
    # derived from their charting (windows.actions.PROCEDURE_ACTIONS)
    assert (intubation.domain, intubation.kind) == ("respiratory_support", "action")
    assert event("datetimeevents", source_key="row:1").domain == "crrt_therapy"

    vanco = event("emar", source_key="10001-1")
    assert (vanco.kind, vanco.category, vanco.value_num, vanco.unit) == (
        "action",
        "vancomycin",
        1000,
        "mg",
    )
    assert vanco.value_text == "Administered, IV"
    held = event("emar", source_key="10002-1")
    assert (held.kind, held.category, held.value_text) == (
        "observation",
        "heparin",
        "Not Given",
    )

    # Drawn at specimen time (CLINICAL_CONCEPTS.md 10b), resulted at its result
    # time: the organism is not known before.
    drawn = event("microbiologyevents", source_key="specimen:1")
    assert (drawn.domain, drawn.category, drawn.name, drawn.value_text) == (
        "microbiology_culture",
        "blood culture",
        "Blood Culture, Routine",
        "culture drawn",
    )
    assert drawn.time.isoformat() == "2151-03-01T14:00:00+00:00"
    assert drawn.end_time.isoformat() == "2151-03-03T10:00:00+00:00"
    result = event("microbiologyevents", source_key="701")
    assert (result.domain, result.category, result.value_text) == (
        "labs",
        "culture_result",
        "ESCHERICHIA COLI: CEFEPIME S",
    )
    assert result.time.isoformat() == "2151-03-03T10:00:00+00:00"
    assert event("microbiologyevents", source_key="702").value_text == "no growth"

    icu = event("transfers", source_key="602")
    assert (icu.domain, icu.category, icu.end_time.isoformat()) == (
        "adt",
        "icu",
        "2151-03-04T12:00:00+00:00",
    )
    assert event("transfers", source_key="601").category == "ed"


@pytest.mark.django_db
def test_suspected_infection_starts_at_the_culture_draw_not_at_its_result(mimic_dir):
    """Culture drawn at 14:00 (end of ICU hour 2), resulted two days later,
    vancomycin at 20:00: suspicion of infection from the draw (CLINICAL_CONCEPTS.md
    10b), not from hour 46 when the result came."""
    from windows.tracks import stay_tracks_build

    mimic_import(directory=mimic_dir)
    tracks = stay_tracks_build(stay=Stay.objects.get(source_id="30001"))

    suspected = dict(zip(tracks.hours, tracks.columns["suspected_infection"]))
    assert suspected[1] == 0 and suspected[2] == 1  # hour 2 ends at 14:00


@pytest.mark.django_db
def test_a_patient_seen_before_gets_the_new_admission(tmp_path):
    tables = mimic_tables()
    first = write_mimic(
        tmp_path / "one", {**tables, "icu/icustays": tables["icu/icustays"][:1]}
    )
    mimic_import(directory=first)

    summary = mimic_import(directory=write_mimic(tmp_path / "both", tables))

    assert (summary.patients, summary.admissions, summary.skipped_admissions) == (
        1,
        1,
        1,
    )
    assert Patient.objects.count() == 2 and Admission.objects.count() == 2


@pytest.mark.django_db
def test_missing_optional_files_are_noted(tmp_path):
    tables = mimic_tables()
    for name in ("icu/chartevents", "hosp/emar", "hosp/emar_detail", "hosp/transfers"):
        del tables[name]
    summary = mimic_import(directory=write_mimic(tmp_path / "m", tables))

    assert "chartevents" not in event_counts()
    assert any("icu/chartevents not found" in note for note in summary.notes)
    assert any("no medication events" in note for note in summary.notes)


@pytest.mark.django_db
def test_prescriptions_stand_in_for_emar(tmp_path):
    tables = mimic_tables()
    del tables["hosp/emar"], tables["hosp/emar_detail"]
    tables["hosp/prescriptions"] = [
        {
            "subject_id": 10001,
            "hadm_id": A1,
            "pharmacy_id": 1,
            "starttime": "2151-03-01 18:00:00",
            "stoptime": "2151-03-05 18:00:00",
            "drug_type": "MAIN",
            "drug": "Vancomycin",
            "dose_val_rx": "1000",
            "dose_unit_rx": "mg",
            "route": "IV",
        },
        {"subject_id": 10001, "hadm_id": A1, "pharmacy_id": 2, "drug": "Heparin"},
    ]
    summary = mimic_import(directory=write_mimic(tmp_path / "m", tables))

    rx = event("prescriptions", source_key="row:1")
    assert (rx.kind, rx.category, rx.value_num, rx.unit, rx.value_text) == (
        "action",
        "vancomycin",
        1000,
        "mg",
        "IV",
    )
    assert any("medications from hosp/prescriptions" in note for note in summary.notes)
    # An order without a starttime cannot be placed in time.
    assert event_counts()["prescriptions"] == 1
    assert summary.dropped["hosp/prescriptions"]["rows without a time"] == 1
