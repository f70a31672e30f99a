"""The signed-in pages: stays list, stay page with its events, imports page."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.factories import (
    coded_procedure,
    drip,
    lab,
    make_admission,
    make_event,
    make_events,
    make_patient,
    make_stay,
    make_user,
    vital,
)
from windows.models import (
    DiseaseGroup,
    ImportRun,
    ImportStatus,
    Outcome,
)

pytestmark = pytest.mark.django_db

STAYS_URL = reverse("windows:stay_list")
IMPORTS_URL = reverse("windows:import_list")
IMPORT_START_URL = reverse("windows:import_start")


@pytest.fixture
def user():
    return make_user(role="physician")


@pytest.fixture
def staff():
    return make_user(staff=True, role="admin")


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


def pseudo_ids(html: str) -> list[str]:
    """Patient pseudo ids in the order the stays table shows them."""
    return re.findall(r'<td class="mono"><a href="/stays/\d+/">([^<]+)</a>', html)


def stay_with_patient(pseudo_id: str, **fields):
    admission = make_admission(patient=make_patient(pseudo_id=pseudo_id))
    return make_stay(admission=admission, **fields)


def event_rows(html: str) -> list[str]:
    return re.findall(r'<tr class="phase-(?:pre|icu|post)".*?</tr>', html, re.DOTALL)


# Sign-in -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [STAYS_URL, reverse("windows:stay_detail", args=[1]), IMPORTS_URL],
)
def test_signed_out_visitor_is_sent_to_the_login_page(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_login_page_signs_in_and_lands_a_physician_on_the_queue(client):
    make_user(username="reader", password="a long passphrase", role="physician")
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b'name="password"' in page.content
    response = client.post(
        reverse("login"), {"username": "reader", "password": "a long passphrase"}
    )
    assert response.status_code == 302
    # Physicians land on their queue (issue 13), not on the stays list.
    assert client.get(response["Location"])["Location"] == reverse("annotation:queue")


def test_pages_show_the_user_and_a_logout_form_with_csrf_on_body(signed_in, user):
    html = signed_in.get(STAYS_URL).content.decode()
    assert user.username in html
    assert f'action="{reverse("logout")}"' in html
    assert 'method="post"' in html
    assert '<body hx-headers=\'{"X-CSRFToken": "' in html
    assert "vendor/htmx.min.js" in html
    # Staff-only links are hidden from other users.
    assert IMPORTS_URL not in html


def test_staff_see_imports_and_admin_links(staff_client):
    html = staff_client.get(STAYS_URL).content.decode()
    assert IMPORTS_URL in html
    assert reverse("admin:index") in html


# Stays list ----------------------------------------------------------------


def test_stays_list_shows_each_stay(signed_in):
    stay = stay_with_patient(
        "PSHOWN01",
        hours=36.24,
        care_unit="Cardiac ICU",
        hospital_outcome=Outcome.DIED,
        admission_diagnosis="I21.4 NSTEMI",
        disease_group=DiseaseGroup.CARDIOVASCULAR,
    )
    html = signed_in.get(STAYS_URL).content.decode()
    assert pseudo_ids(html) == ["PSHOWN01"]
    for text in (
        "Cardiac ICU",
        "36.2",
        "Died in hospital",
        "Cardiovascular Disorders",
        "I21.4 NSTEMI",
        reverse("windows:stay_detail", args=[stay.pk]),
    ):
        assert text in html


def test_stays_list_sorts_by_length_both_ways(signed_in):
    stay_with_patient("PMEDIUM", hours=30)
    stay_with_patient("PSHORT", hours=5)
    stay_with_patient("PLONG", hours=200)

    ascending = signed_in.get(STAYS_URL, {"sort": "length"}).content.decode()
    descending = signed_in.get(STAYS_URL, {"sort": "-length"}).content.decode()

    assert pseudo_ids(ascending) == ["PSHORT", "PMEDIUM", "PLONG"]
    assert pseudo_ids(descending) == ["PLONG", "PMEDIUM", "PSHORT"]
    # The current column's header offers the reverse order.
    assert 'aria-sort="ascending"' in ascending
    assert "?sort=-length" in ascending


def test_stays_list_sorts_by_outcome_and_by_group(signed_in):
    base = make_admission().admit_time
    stay_with_patient(
        "PSURV",
        hospital_outcome=Outcome.SURVIVED,
        disease_group=DiseaseGroup.RESPIRATORY,
        intime=base + timedelta(hours=1),
    )
    stay_with_patient(
        "PDIED",
        hospital_outcome=Outcome.DIED,
        disease_group=DiseaseGroup.SEPSIS,
        intime=base + timedelta(hours=2),
    )
    stay_with_patient(
        "PCARD",
        hospital_outcome=Outcome.SURVIVED,
        disease_group=DiseaseGroup.CARDIOVASCULAR,
        intime=base + timedelta(hours=3),
    )

    by_outcome = signed_in.get(STAYS_URL, {"sort": "outcome"}).content.decode()
    by_outcome_desc = signed_in.get(STAYS_URL, {"sort": "-outcome"}).content.decode()
    by_group = signed_in.get(STAYS_URL, {"sort": "group"}).content.decode()

    assert pseudo_ids(by_outcome) == ["PDIED", "PSURV", "PCARD"]
    assert pseudo_ids(by_outcome_desc) == ["PSURV", "PCARD", "PDIED"]
    assert pseudo_ids(by_group) == ["PCARD", "PSURV", "PDIED"]


@pytest.mark.parametrize(
    "sort", ["admission__patient__source_id", "id; DROP TABLE windows_stay", "", "-"]
)
def test_unknown_sort_falls_back_to_icu_admission_time(signed_in, sort):
    base = make_admission().admit_time
    stay_with_patient("PLATER", intime=base + timedelta(days=3), hours=1)
    stay_with_patient("PEARLIER", intime=base + timedelta(days=1), hours=100)

    response = signed_in.get(STAYS_URL, {"sort": sort})

    assert response.status_code == 200
    assert pseudo_ids(response.content.decode()) == ["PEARLIER", "PLATER"]


def test_stays_list_filters_by_group_and_outcome(signed_in):
    stay_with_patient(
        "PSEPDIED", disease_group=DiseaseGroup.SEPSIS, hospital_outcome=Outcome.DIED
    )
    stay_with_patient("PSEPSURV", disease_group=DiseaseGroup.SEPSIS)
    stay_with_patient("PRESP", disease_group=DiseaseGroup.RESPIRATORY)

    sepsis = signed_in.get(STAYS_URL, {"group": "sepsis"}).content.decode()
    died = signed_in.get(
        STAYS_URL, {"group": "sepsis", "outcome": "died"}
    ).content.decode()
    bogus = signed_in.get(STAYS_URL, {"group": "not-a-group"}).content.decode()

    assert sorted(pseudo_ids(sepsis)) == ["PSEPDIED", "PSEPSURV"]
    assert pseudo_ids(died) == ["PSEPDIED"]
    assert len(pseudo_ids(bogus)) == 3


def test_stays_list_shows_50_stays_a_page(signed_in):
    admission = make_admission()
    for i in range(51):
        make_stay(
            admission=admission,
            intime=admission.admit_time + timedelta(days=i),
            hours=1,
        )

    first = signed_in.get(STAYS_URL).content.decode()
    second = signed_in.get(STAYS_URL, {"page": 2}).content.decode()
    past_the_end = signed_in.get(STAYS_URL, {"page": 99})

    assert len(pseudo_ids(first)) == 50
    assert "Page 1 of 2" in first
    assert "data-page-next" in first
    assert len(pseudo_ids(second)) == 1
    assert "Page 2 of 2" in second
    assert past_the_end.status_code == 200  # the last page, not an error


def test_htmx_request_gets_only_the_stays_table(signed_in):
    stay_with_patient("PHTMX", hours=3)

    response = signed_in.get(STAYS_URL, {"sort": "-length"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()

    assert "<html" not in html
    assert '<nav class="mainnav"' not in html
    assert html.lstrip().startswith('<section id="stay-table"')
    assert pseudo_ids(html) == ["PHTMX"]
    assert "HX-Request" in response["Vary"]


def test_htmx_history_restore_gets_the_whole_page(signed_in):
    response = signed_in.get(
        STAYS_URL, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )
    assert "<html" in response.content.decode()


def test_stays_list_queries_do_not_grow_with_the_number_of_stays(signed_in):
    def queries_for_page() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert signed_in.get(STAYS_URL).status_code == 200
        return len(ctx.captured_queries)

    for _ in range(3):
        stay = make_stay()
        make_events(admission=stay.admission, count=2)
    with_3 = queries_for_page()
    for _ in range(27):
        stay = make_stay()
        make_events(admission=stay.admission, count=2)
    with_30 = queries_for_page()

    assert with_30 == with_3
    assert with_3 <= 5  # session, user, count, page


def test_stays_list_shows_keyboard_shortcuts(signed_in):
    html = signed_in.get(STAYS_URL).content.decode()
    assert 'id="shortcut-help"' in html
    assert "<kbd>j</kbd>" in html and "<kbd>/</kbd>" in html
    assert "js/app.js" in html


# Stay page -----------------------------------------------------------------


@pytest.fixture
def icu_stay():
    """A 48 h ICU stay that starts 24 h into its admission."""
    return stay_with_patient("PTRAJ01", hours=48)


ADMITTED = -24  # icu_stay's hospital admission, in hours since its ICU admission


def test_stay_page_shows_the_stay_and_its_admission(signed_in, icu_stay):
    other = make_stay(
        admission=icu_stay.admission, intime=icu_stay.outtime + timedelta(days=2)
    )
    html = signed_in.get(
        reverse("windows:stay_detail", args=[icu_stay.pk])
    ).content.decode()

    for text in (
        "PTRAJ01",
        "Medical ICU",
        "48.0 h",
        "Survived",
        "Sepsis &amp; Severe Infection",
        "A41.9 Sepsis, unspecified organism",
        "2024-01-02 08:00",
        "2024-01-04 08:00",
    ):
        assert text in html
    assert reverse("windows:stay_detail", args=[other.pk]) in html


def test_stay_page_places_events_in_hours_since_icu_admission(signed_in, icu_stay):
    intime, outtime = icu_stay.intime, icu_stay.outtime
    admission = icu_stay.admission
    make_event(
        admission=admission, time=intime - timedelta(hours=6), name="ED heart rate"
    )
    make_event(
        admission=admission,
        time=intime + timedelta(hours=1, minutes=30),
        name="ICU heart rate",
    )
    make_event(
        admission=admission, time=outtime + timedelta(hours=2), name="Ward heart rate"
    )

    html = signed_in.get(
        reverse("windows:stay_detail", args=[icu_stay.pk])
    ).content.decode()
    rows = event_rows(html)

    assert len(rows) == 3
    assert rows[0].startswith('<tr class="phase-pre"') and "-6.0" in rows[0]
    assert "ED heart rate" in rows[0]
    assert rows[1].startswith('<tr class="phase-icu"') and ">1.5<" in rows[1]
    assert rows[2].startswith('<tr class="phase-post"') and "50.0" in rows[2]
    assert "hindsight" in rows[2]
    assert "88 bpm" in rows[1]
    assert "vitals" in rows[1]


def test_stay_page_filters_events_by_kind(signed_in, icu_stay):
    admission = icu_stay.admission
    make_event(admission=admission, name="Heart rate")
    drip(icu_stay, "norepinephrine", 0.1, ADMITTED)
    url = reverse("windows:stay_detail", args=[icu_stay.pk])

    rows = event_rows(signed_in.get(url, {"kind": "action"}).content.decode())

    assert len(rows) == 1
    assert "Norepinephrine" in rows[0] and "0.1 mcg/kg/min" in rows[0]


def test_stay_page_filters_events_by_category_and_domain(signed_in, icu_stay):
    admission = icu_stay.admission
    make_events(admission=admission, count=2, category="heart_rate", name="Heart rate")
    vital(icu_stay, "sbp", 120, ADMITTED, unit="mmHg", name="Systolic BP")
    lab(icu_stay, "creatinine", 1.4, ADMITTED, unit="mg/dL", name="Creatinine")
    url = reverse("windows:stay_detail", args=[icu_stay.pk])

    page = signed_in.get(url).content.decode()
    by_category = event_rows(signed_in.get(url, {"category": "sbp"}).content.decode())
    by_domain = event_rows(signed_in.get(url, {"domain": "labs"}).content.decode())
    unknown = event_rows(
        signed_in.get(url, {"category": "nope", "domain": "x"}).content.decode()
    )

    # The category select lists what this admission holds, grouped by domain.
    assert '<optgroup label="Vitals">' in page and '<option value="creatinine"' in page
    assert len(by_category) == 1 and "Systolic BP" in by_category[0]
    assert len(by_domain) == 1 and "Creatinine" in by_domain[0]
    assert len(unknown) == 4  # unknown filter values are ignored


def test_stay_page_shows_100_events_a_page(signed_in, icu_stay):
    make_events(admission=icu_stay.admission, count=150, every=timedelta(minutes=10))
    url = reverse("windows:stay_detail", args=[icu_stay.pk])

    first = signed_in.get(url).content.decode()
    second = signed_in.get(url, {"page": 2}, HTTP_HX_REQUEST="true").content.decode()

    assert len(event_rows(first)) == 100
    assert len(event_rows(second)) == 50
    assert "<html" not in second and 'id="event-table"' in second


def test_stay_page_of_a_missing_stay_is_404(signed_in):
    assert (
        signed_in.get(reverse("windows:stay_detail", args=[999999])).status_code == 404
    )


def test_event_text_from_a_data_file_is_escaped(signed_in, icu_stay):
    make_event(
        admission=icu_stay.admission,
        value_num=None,
        unit="",
        value_text="<script>alert(1)</script>",
        name="<b>note</b>",
    )

    html = signed_in.get(
        reverse("windows:stay_detail", args=[icu_stay.pk])
    ).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>note</b>" not in html


# Imports page --------------------------------------------------------------


def test_imports_pages_are_403_for_non_staff(signed_in):
    run = ImportRun.objects.create(source="clif")
    assert signed_in.get(IMPORTS_URL).status_code == 403
    assert (
        signed_in.get(reverse("windows:import_progress", args=[run.pk])).status_code
        == 403
    )
    assert signed_in.post(IMPORT_START_URL, {"source": "clif_demo"}).status_code == 403
    assert ImportRun.objects.count() == 1


def test_imports_page_lists_runs_for_staff(staff_client, staff):
    ImportRun.objects.create(
        source="clif",
        status=ImportStatus.DONE,
        progress_done=10,
        progress_total=10,
        summary={"stays": 12, "events": 3456},
        started_by=staff,
    )
    ImportRun.objects.create(
        source="mimic",
        path="/data/mimic",
        status=ImportStatus.FAILED,
        error="file icu/icustays.csv, row 3, column intime: <bad> time",
    )

    html = staff_client.get(IMPORTS_URL).content.decode()

    assert "CLIF demo" in html and "/data/mimic" in html
    assert '<progress max="100" value="100"' in html
    assert "events</span> 3456" in html
    assert "row 3, column intime: &lt;bad&gt; time" in html
    assert 'action="/imports/start/"' in html


def test_starting_an_import_outside_the_import_folders_shows_the_error(
    staff_client, settings, tmp_path
):
    settings.REALICU_IMPORT_ROOTS = [str(tmp_path / "imports")]

    response = staff_client.post(IMPORT_START_URL, {"source": "mimic", "path": "/etc"})

    assert response.status_code == 400
    assert "/etc is outside the import folders" in response.content.decode()
    assert ImportRun.objects.count() == 0


def test_starting_a_mimic_import_without_a_folder_is_rejected(staff_client):
    response = staff_client.post(IMPORT_START_URL, {"source": "mimic", "path": ""})

    assert response.status_code == 400
    assert "A MIMIC-IV import needs a folder" in response.content.decode()
    assert ImportRun.objects.count() == 0


def test_an_unknown_source_is_rejected(staff_client):
    response = staff_client.post(IMPORT_START_URL, {"source": "csv", "path": "/tmp"})

    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert ImportRun.objects.count() == 0


@pytest.mark.parametrize(
    "data",
    [{"source": "clif_demo", "path": "/ignored"}, {"source": "clif", "path": ""}],
)
def test_starting_the_clif_demo_queues_a_run_without_a_folder(staff_client, data):
    response = staff_client.post(IMPORT_START_URL, data)

    assert response.status_code == 302
    run = ImportRun.objects.get()
    assert (run.source, run.path, run.status) == ("clif", "", ImportStatus.QUEUED)


def test_starting_an_import_of_an_allowed_folder_queues_a_run(
    staff_client, staff, settings, tmp_path
):
    folder = tmp_path / "mimic"
    folder.mkdir()
    settings.REALICU_IMPORT_ROOTS = [str(tmp_path)]

    response = staff_client.post(
        IMPORT_START_URL, {"source": "mimic", "path": str(folder)}
    )

    assert response.status_code == 302 and response["Location"] == IMPORTS_URL
    run = ImportRun.objects.get()
    assert (run.source, run.path, run.status, run.started_by) == (
        "mimic",
        str(folder),
        ImportStatus.QUEUED,
        staff,
    )
    page = staff_client.get(IMPORTS_URL).content.decode()
    assert f"Import {run.pk} queued." in page


def test_a_running_import_polls_its_progress_until_it_ends(staff_client):
    run = ImportRun.objects.create(
        source="clif",
        status=ImportStatus.RUNNING,
        progress_done=1,
        progress_total=4,
        progress_label="Reading vitals",
        # A live worker: a running import without a recent heartbeat is
        # re-queued by the page's reaper check (jobs.reaper.job_check).
        heartbeat_at=timezone.now(),
        worker="host:1",
    )
    url = reverse("windows:import_progress", args=[run.pk])

    page = staff_client.get(IMPORTS_URL).content.decode()
    running = staff_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportStatus.DONE, progress_done=4
    )
    done = staff_client.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert f'hx-get="{url}" hx-trigger="every 1s"' in page
    assert running.lstrip().startswith(f'<tr id="import-run-{run.pk}"')
    assert 'hx-trigger="every 1s"' in running and "25%" in running
    assert "Reading vitals" in running
    assert "hx-trigger" not in done and "100%" in done
    assert (
        staff_client.get(
            reverse("windows:import_progress", args=[run.pk + 1])
        ).status_code
        == 404
    )


def test_stay_page_lists_coded_records_apart_from_the_timeline(signed_in, icu_stay):
    coded = coded_procedure(icu_stay, 5, code="0BH17EZ")
    html = signed_in.get(
        reverse("windows:stay_detail", args=[icu_stay.pk])
    ).content.decode()
    timeline = html.split('class="coded-records"')[0]
    assert "0BH17EZ" not in timeline
    section = html.split('class="coded-records"')[1]
    assert "Coded after discharge" in section
    assert "0BH17EZ" in section
    assert "Insertion of Endotracheal Airway into Trachea" in section
    assert coded.time.strftime("%Y-%m-%d") in section
    # Coded records are not a kind the timeline filters to.
    assert 'value="coded"' not in html
    response = signed_in.get(
        reverse("windows:stay_detail", args=[icu_stay.pk]) + "?kind=coded"
    )
    assert "0BH17EZ" not in response.content.decode().split('class="coded-records"')[0]


def test_stay_page_names_events_by_concept(signed_in, icu_stay):
    vital(icu_stay, "temp_c", 36.7, 1, unit="°C", name="Temperature Fahrenheit")
    html = signed_in.get(
        reverse("windows:stay_detail", args=[icu_stay.pk])
    ).content.decode()
    assert "source label: Temperature Fahrenheit" in html
    assert ">Temperature Fahrenheit<" not in html
    assert "36.7 °C" in html
