"""The window page physicians label on: its header and window bounds, the event
table (its span, highlighting, grouping, filters, escaping), the links to the
neighbouring windows, and the coded records kept apart from the table."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from tests.factories import (
    at,
    code_status,
    coded_procedure,
    drip,
    make_admission,
    make_event,
    make_events,
    make_patient,
    vital,
)
from tests.windows.window_pages import (
    build_stay,
    event_row,
    group_heads,
    row_classes,
    tracks_url,
    window_url,
)
from windows.models import DiseaseGroup, Domain, EventKind, StayTracks, Window
from windows.windowing import windows_sample_gold

pytestmark = pytest.mark.django_db


def test_window_page_shows_the_patient_header_and_the_window_bounds(signed_in):
    patient = make_patient(pseudo_id="PWIN0001", sex="Male", age=71)
    stay = build_stay(
        admission=make_admission(patient=patient),
        admission_diagnosis="J96.01 Acute respiratory failure with hypoxia",
        disease_group=DiseaseGroup.RESPIRATORY,
        care_unit="Medical ICU",
    )
    window = Window.objects.get(stay=stay, index=3)  # [+6 h, +6.5 h)
    code_status(stay, 1)
    # An hour after the window: not yet known.
    assert window.end == at(stay, 6.5)
    code_status(stay, 7.5, "DNR", "DNR (do not resuscitate)")
    vital(stay, "weight_kg", 82.5, 2, unit="kg", name="Daily weight")

    response = signed_in.get(window_url(stay, 3))
    html = response.content.decode()

    assert response.status_code == 200
    for text in (
        "PWIN0001",
        "Male",
        "71",
        "J96.01 Acute respiratory failure with hypoxia",
        "Respiratory Disorders",
        "Medical ICU",
        "82.5 kg",
        ">Full</span>",
        "Window 3",
        "6.0 h to 6.5 h since ICU admission",
        "2024-01-02 14:00–14:30",
    ):
        assert text in html, text
    assert "DNR" not in html
    # The hospital outcome is not part of the labelling page's header.
    assert "Survived" not in html


def test_code_status_charted_at_the_window_end_is_not_yet_known(signed_in):
    stay = build_stay()
    window = Window.objects.get(stay=stay, index=2)
    # A window is [start, end): a charting at its end belongs to what follows.
    assert window.end == at(stay, 4.5)
    code_status(stay, 4.5, "DNR", "DNR")
    html = signed_in.get(window_url(stay, 2)).content.decode()
    assert "Not recorded" in html and ">DNR<" not in html
    html = signed_in.get(window_url(stay, 3)).content.decode()
    assert ">DNR</span>" in html


def test_weight_without_charting_falls_back_to_the_tracks_weight(signed_in):
    stay = build_stay()
    drip(stay, "norepinephrine", 0.1, 1)
    StayTracks.objects.update_or_create(
        stay=stay,
        defaults={
            "events_signature": "x",
            "hours": [],
            "columns": {},
            "meta": {"weight_kg": 70.25},
        },
    )
    html = signed_in.get(window_url(stay, 1)).content.decode()
    assert "70.2 kg" in html or "70.3 kg" in html


def test_event_table_covers_six_hours_before_the_window_to_its_end(
    signed_in, stay_with_events
):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()

    assert event_row(html, events["five_h_before"]) is not None
    assert event_row(html, events["seven_h_before"]) is None
    assert event_row(html, events["in_window"]) is not None
    assert event_row(html, events["window_action"]) is not None
    assert event_row(html, events["at_end"]) is None
    assert event_row(html, events["after"]) is None
    assert event_row(html, events["death"]) is None  # outcomes are never shown
    assert "Showing 1–4 of 4 events" in html


def test_window_actions_are_highlighted(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()

    assert "window-action" in row_classes(html, events["window_action"])
    assert "pos-in" in row_classes(html, events["window_action"])
    # An action before the window and an observation in it are not its actions.
    assert "window-action" not in row_classes(html, events["action_before"])
    assert "pos-before" in row_classes(html, events["action_before"])
    assert row_classes(html, events["in_window"]) == {"pos-in"}


def test_events_are_grouped_by_domain_in_reading_order(signed_in, stay_with_events):
    stay, _, _ = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()

    assert group_heads(html) == ["Vitals", "Labs", "Continuous medications"]
    # Within a group, time order.
    body = html.split('data-domain="medication_admin_continuous"')[1]
    assert body.index("Norepinephrine earlier") < body.index("Norepinephrine up")


def test_widening_shows_the_whole_stay(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5, scope="stay")).content.decode()

    for key in ("seven_h_before", "five_h_before", "window_action", "at_end", "after"):
        assert event_row(html, events[key]) is not None, key
    assert "pos-after" in row_classes(html, events["after"])
    assert "window-action" in row_classes(html, events["window_action"])
    assert event_row(html, events["death"]) is None
    assert "Showing 1–7 of 7 events" in html
    # The control that narrows it back.
    assert 'href="?scope=window"' in html


def test_window_page_offers_the_whole_stay_control(signed_in, stay_with_events):
    stay, _, _ = stay_with_events
    html = signed_in.get(window_url(stay, 5)).content.decode()
    assert re.search(
        r'<a class="button button-small" href="\?scope=stay"[^>]*'
        r'hx-get="\?scope=stay"[^>]*data-shortcut-scope',
        html,
    )


def test_whole_stay_pages_its_events_and_says_how_many(signed_in):
    stay = build_stay(hours=100)
    make_events(
        admission=stay.admission,
        count=600,
        start=stay.intime,
        every=timedelta(minutes=10),
    )
    first = signed_in.get(window_url(stay, 10, scope="stay")).content.decode()
    third = signed_in.get(window_url(stay, 10, scope="stay", page=3)).content.decode()

    assert "Showing 1–250 of 600 events" in first
    assert "Page 1 of 3" in first
    assert "page=2" in first and "data-page-next" in first
    assert first.count("data-event-id=") == 250
    assert "Showing 501–600 of 600 events" in third
    assert third.count("data-event-id=") == 100
    # The group heading says the domain's whole count, and what this page holds.
    assert "600 events, 100 on this page" in third


def test_event_table_filters_by_domain(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    html = signed_in.get(window_url(stay, 5, domain="labs")).content.decode()
    assert group_heads(html) == ["Labs"]
    assert event_row(html, events["in_window"]) is not None
    assert "Showing 1–1 of 1 event" in html
    # An unknown domain is ignored.
    html = signed_in.get(window_url(stay, 5, domain="nope")).content.decode()
    assert "Showing 1–4 of 4 events" in html


def test_htmx_request_gets_only_the_event_table(signed_in, stay_with_events):
    stay, _, events = stay_with_events
    response = signed_in.get(window_url(stay, 5, scope="stay"), HTTP_HX_REQUEST="true")
    html = response.content.decode()

    assert html.lstrip().startswith('<section id="window-events"')
    assert "<html" not in html and "Stay overview" not in html
    assert event_row(html, events["after"]) is not None
    assert "HX-Request" in response["Vary"]


def test_event_text_from_a_data_file_is_escaped(signed_in):
    stay = build_stay(admission_diagnosis="<img src=x onerror=alert(2)>")
    window = Window.objects.get(stay=stay, index=1)
    make_event(
        admission=stay.admission,
        time=window.start + timedelta(minutes=1),
        kind=EventKind.ACTION,
        domain=Domain.MED_INTERMITTENT,
        category="<b>cat</b>",
        name="<script>alert(1)</script>",
        value_num=None,
        value_text='"><svg onload=alert(3)>',
    )
    html = signed_in.get(window_url(stay, 1)).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "<svg onload" not in html
    assert "<b>cat</b>" not in html


def test_previous_and_next_windows_are_linked_with_their_keys(signed_in):
    stay = build_stay(hours=8)  # windows 0..3
    first = signed_in.get(window_url(stay, 0)).content.decode()
    middle = signed_in.get(window_url(stay, 1)).content.decode()
    last = signed_in.get(window_url(stay, 3)).content.decode()

    assert f'href="{window_url(stay, 1)}" data-shortcut-next' in first
    assert "data-shortcut-prev" not in first
    assert f'href="{window_url(stay, 0)}" data-shortcut-prev' in middle
    assert f'href="{window_url(stay, 2)}" data-shortcut-next' in middle
    assert "data-shortcut-next" not in last
    # The keys are shown on the page and in the "?" panel.
    assert "<kbd>[</kbd>" in middle and "<kbd>]</kbd>" in middle
    panel = middle.split('id="shortcut-help"')[1]
    assert "Next window" in panel and "Previous window" in panel
    assert reverse("windows:stay_detail", args=[stay.pk]) in middle


def test_window_page_loads_the_plots_and_their_data(signed_in):
    stay = build_stay(hours=8)
    html = signed_in.get(window_url(stay, 2)).content.decode()
    assert "vendor/uPlot.iife.min.js" in html and "vendor/uPlot.min.css" in html
    assert "js/trajectory.js" in html
    assert f'data-tracks-url="{tracks_url(stay)}?window=2"' in html
    assert "data-overview" in html and "data-plots" in html


def test_gold_windows_are_listed_on_the_window_page(signed_in):
    stay = build_stay(hours=24)
    gold = windows_sample_gold(stay=stay, seed=1, per_stay=3)
    html = signed_in.get(window_url(stay, gold[0].index)).content.decode()
    assert "Gold windows of this stay" in html
    for window in gold[1:]:
        assert f'href="{window_url(stay, window.index)}"' in html
    assert "badge-gold" in html


@pytest.mark.parametrize(
    "make_url",
    [
        lambda stay: reverse("windows:window_detail", args=[stay.pk + 1000, 0]),
        lambda stay: reverse("windows:window_detail", args=[stay.pk, 99]),
        lambda stay: reverse("windows:stay_tracks_json", args=[stay.pk + 1000]),
        lambda stay: tracks_url(stay, window=99),
        lambda stay: tracks_url(stay, window="x"),
    ],
)
def test_unknown_stay_or_window_is_404(signed_in, make_url):
    stay = build_stay(hours=8)
    assert signed_in.get(make_url(stay)).status_code == 404


@pytest.mark.parametrize("name", ["window_detail", "stay_tracks_json"])
def test_signed_out_visitor_is_sent_to_the_login_page(client, name):
    stay = build_stay(hours=8)
    args = [stay.pk, 0] if name == "window_detail" else [stay.pk]
    response = client.get(reverse(f"windows:{name}", args=args))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def coded_section(html: str) -> str:
    match = re.search(r"<section class=\"coded-records\".*?</section>", html, re.DOTALL)
    assert match, "no coded-after-discharge section"
    return match.group(0)


def test_coded_records_are_listed_apart_marked_and_titled_never_in_the_window_table(
    signed_in,
):
    stay = build_stay()
    window = Window.objects.get(stay=stay, index=3)
    # Billed at 05:00 of a date inside the window's look-back: it must not be
    # interleaved as if ventilation > 96 h had been charted then.
    assert window.start == at(stay, 6)
    coded = coded_procedure(stay, 5)
    coded_procedure(stay, 5, "ICD9", "9671")
    charted = make_event(admission=stay.admission, time=window.start)

    for url in (window_url(stay, 3), window_url(stay, 3, scope="stay")):
        html = signed_in.get(url).content.decode()
        assert event_row(html, charted) is not None
        assert event_row(html, coded) is None
        section = coded_section(html)
        assert "Coded after discharge" in section
        assert "5A1955Z" in section
        assert "Respiratory Ventilation, Greater than 96 Consecutive Hours" in section
        assert "96.71" in section
        assert "Continuous invasive mechanical ventilation" in section
        # Not citable as evidence: coded rows carry no event id.
        assert "data-event-id" not in section
        # The domain filter does not count them either.
        assert "Procedures (" not in html.split("coded-records")[0]


def test_htmx_event_table_keeps_the_coded_section(signed_in):
    """The annotation page embeds the event table partial: the coded section
    comes with it."""
    stay = build_stay()
    coded_procedure(stay, 30)
    html = signed_in.get(window_url(stay, 1), HTTP_HX_REQUEST="true").content.decode()
    assert "5A1955Z" in coded_section(html)


def test_window_without_coded_records_has_no_coded_section(signed_in):
    stay = build_stay()
    html = signed_in.get(window_url(stay, 1)).content.decode()
    assert "coded-records" not in html


def test_events_are_named_by_their_concept_with_the_unit_of_their_value(signed_in):
    stay = build_stay()
    start = 2  # window 1's start, in hours since ICU admission
    temperature = vital(
        stay, "temp_c", 36.7, start, unit="°C", name="Temperature Fahrenheit"
    )
    weight = vital(
        stay, "weight_kg", 77.8, start, unit="kg", name="Admission Weight (lbs.)"
    )
    drug = drip(stay, "albumin_infusion", 20, start, name="Albumin 25%", unit="mL/hour")
    html = signed_in.get(window_url(stay, 1)).content.decode()
    temp_row, weight_row = event_row(html, temperature), event_row(html, weight)
    # The concept is what the row says; the source label is only a tooltip.
    assert ">Temperature</td>" in temp_row.replace("\n", "")
    assert "36.7 °C" in temp_row
    assert "source label: Temperature Fahrenheit" in temp_row
    assert ">Temperature Fahrenheit<" not in temp_row
    assert ">Weight</td>" in weight_row.replace("\n", "")
    assert "77.8 kg" in weight_row
    assert ">Admission Weight (lbs.)<" not in weight_row
    # A drug's product name says more than its category: shown beside it.
    drug_row = event_row(html, drug)
    assert "Albumin infusion" in drug_row
    assert '<span class="muted">Albumin 25%</span>' in drug_row


def test_admission_diagnosis_is_marked_as_coded_after_discharge(signed_in):
    stay = build_stay(
        admission_diagnosis="414.01 Coronary atherosclerosis of native coronary "
        "artery (ICD-9-CM)"
    )
    html = signed_in.get(window_url(stay, 1)).content.decode()
    assert "Admission diagnosis" in html
    assert "(coded after discharge)" in html
    assert "414.01 Coronary atherosclerosis of native coronary artery" in html
