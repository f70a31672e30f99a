"""Notes on the window page (issue 21): a radiology report at its time in the
event table with its text (and on the overview's notes lane), the discharge
summary only in its hindsight part, marked as written at discharge."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import (
    discharge_summary,
    make_stay,
    make_user,
    radiology_report,
)
from windows.windowing import windows_build

pytestmark = pytest.mark.django_db

REPORT = "FINDINGS: New bilateral airspace opacities. IMPRESSION: ARDS pattern."
LATER = "FINDINGS: Worsening left effusion. IMPRESSION: Effusion."
SUMMARY = "Brief Hospital Course: septic shock; Discharge Disposition: Expired"


@pytest.fixture
def page(client):
    client.force_login(make_user(role="physician"))
    stay = make_stay(hours=48)
    windows_build(stay=stay, window_minutes=30, stride_hours=2)
    # Window 2 is 4 h-4.5 h; the summary is written two days after the stay.
    report = radiology_report(stay, 4 + 10 / 60, REPORT, source_key="10001-RR-1")
    radiology_report(
        stay, 10, LATER, name="CHEST (PA AND LAT)", source_key="10001-RR-2"
    )
    discharge_summary(stay, 48 + 48, SUMMARY, source_key="10001-DS-1")
    url = reverse("windows:window_detail", args=[stay.pk, 2])
    return client, url, report


def _section(html: str, marker: str) -> str:
    start = html.index(marker)
    return html[start : html.index("</section>", start)]


def test_report_at_its_time_and_summary_only_in_hindsight_part(page):
    client, url, report = page
    html = client.get(url).content.decode()
    table = _section(html, 'id="window-events"')
    table = table[: table.index("data-discharge-summaries")]
    row = re.search(
        rf'<tr class="([^"]*)" data-event-id="{report.pk}">(.*?)</tr>', table, re.S
    )
    assert row, "the report is a row of the window's event table"
    assert "pos-in" in row.group(1)
    assert "CHEST (PORTABLE AP)" in row.group(2)
    assert REPORT in row.group(2)
    # The later report is after the window's end: not in its table.
    assert LATER not in table
    assert SUMMARY not in table
    hindsight = _section(html, "data-discharge-summaries")
    assert "Written at discharge" in hindsight
    assert SUMMARY in hindsight
    assert html.count(SUMMARY) == 1


def test_notes_lane_marks_reports_of_the_stay(page):
    client, url, report = page
    html = client.get(url).content.decode()
    lane = html[html.index("data-notes-lane") :]
    lane = lane[: lane.index("</div>")]
    assert f'data-note-id="{report.pk}"' in lane
    assert lane.count("note-mark") == 2
    assert "CHEST (PORTABLE AP)" in lane
    assert "Discharge" not in lane


def test_whole_stay_scope_shows_both_reports_never_the_summary(page):
    client, url, _ = page
    html = client.get(url + "?scope=stay").content.decode()
    table = _section(html, 'id="window-events"')
    table = table[: table.index("data-discharge-summaries")]
    assert REPORT in table and LATER in table
    assert SUMMARY not in table


def test_a_long_report_is_folded_and_its_cell_holds_its_text_once(page):
    client, url, report = page
    long_text = "FINDINGS: " + " ".join(f"finding{i} unchanged." for i in range(80))
    report.value_text = long_text
    report.save()
    html = client.get(url).content.decode()
    row = re.search(rf'data-event-id="{report.pk}">(.*?)</tr>', html, re.S).group(1)
    cell = re.search(r'<td class="note-text">(.*?)</td>', row, re.S).group(1)
    assert "<details" in cell and "<summary>FINDINGS: finding0" in cell
    text = re.sub(r"<[^>]+>", "", cell)
    assert text == long_text


def test_stay_page_has_the_notes_lane(page):
    from windows.models import Stay

    client, _, report = page
    stay = Stay.objects.get(admission_id=report.admission_id)
    html = client.get(reverse("windows:stay_detail", args=[stay.pk])).content.decode()
    lane = html[html.index("data-notes-lane") :]
    lane = lane[: lane.index("</div>")]
    assert lane.count("note-mark") == 2
    assert f'data-note-id="{report.pk}"' in lane
