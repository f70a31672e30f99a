"""The physician's pages: the queue, the annotation page, and the endpoints its
script posts drafts and submits to."""

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from annotation.models import Assignment, AssignmentState, Label
from annotation.services import label_save_draft, label_submit
from tests.annotation.helpers import written_state
from tests.factories import make_event
from windows.models import Domain

pytestmark = pytest.mark.django_db


def page_url(assignment) -> str:
    return reverse("annotation:annotate", args=[assignment.pk])


def post_label(client, assignment, action: str, payload: dict, base_version, **extra):
    return client.post(
        reverse(f"annotation:{action}", args=[assignment.pk]),
        {"payload": json.dumps(payload), "base_version": base_version, **extra},
        headers={"HX-Request": "true"},
    )


@pytest.fixture
def physician(client, physicians):
    client.force_login(physicians[0])
    return physicians[0]


@pytest.fixture
def submitted(physician, submitted):
    """conftest's submitted label, its physician signed in."""
    return submitted


# The queue ---------------------------------------------------------------------


def test_queue_shows_own_assignments_only_in_stay_and_window_order(
    client, physician, physicians, campaign
):
    own = list(Assignment.objects.filter(annotator=physician).order_by("window__index"))
    response = client.get(reverse("annotation:queue"))
    assert response.status_code == 200
    html = response.content.decode()
    shown = [int(pk) for pk in re.findall(r'data-assignment-id="(\d+)"', html)]
    assert shown == [a.pk for a in own]
    others = Assignment.objects.filter(annotator=physicians[1])
    assert not set(shown) & {a.pk for a in others}
    assert "0 of 3 submitted" in html
    assert "data-next-assignment" in html


def test_queue_shows_states_and_progress(client, physician, campaign, complete_payload):
    first, second, _ = Assignment.objects.filter(annotator=physician).order_by(
        "window__index"
    )
    label_submit(
        annotator=physician,
        assignment_id=first.pk,
        payload=complete_payload,
        base_version=0,
    )
    label_save_draft(
        annotator=physician, assignment_id=second.pk, payload={}, base_version=0
    )
    html = client.get(reverse("annotation:queue")).content.decode()
    assert f'data-assignment-id="{first.pk}" data-state="submitted"' in html
    assert f'data-assignment-id="{second.pk}" data-state="draft"' in html
    assert "1 of 3 submitted (33%)" in html
    # "n" opens the next unfinished one: the draft.
    assert re.search(rf'href="{page_url(second)}" data-next-assignment', html), (
        "the next-unfinished link points to the draft"
    )


def test_queue_is_refused_to_a_researcher(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("annotation:queue")).status_code == 403


def test_queue_needs_sign_in(client):
    response = client.get(reverse("annotation:queue"))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


# The annotation page ----------------------------------------------------------


def test_page_shows_the_trajectory_and_the_recorded_critical_actions(
    client, physician, assignment, clinical
):
    response = client.get(page_url(assignment))
    assert response.status_code == 200
    html = response.content.decode()
    assert "data-trajectory" in html
    assert f'data-event-id="{clinical["lactate"].pk}"' in html  # event table
    actions = re.findall(r'data-action-id="(\d+)"', html)
    # Norepinephrine and the ventilator are critical; insulin is routine.
    assert actions == [
        str(clinical["norepinephrine"].pk),
        str(clinical["intubation"].pk),
    ]
    assert 'data-version="0"' in html
    assert 'data-submission-id="' in html
    # The routine one is listed, not rated, with the reason (issue 35).
    assert re.findall(r'data-routine-action-id="(\d+)"', html) == [
        str(clinical["insulin"].pk)
    ]
    assert "Not rated: routine under this campaign's critical-action" in html


def test_a_window_of_routine_actions_only_says_why_none_is_rated(
    client, physician, assignment, clinical
):
    campaign = assignment.campaign
    campaign.critical_action_categories = [
        rule
        for rule in campaign.critical_action_categories
        if rule["key"] not in ("vasoactives_inotropes", "ventilation_oxygen")
    ]
    campaign.save(update_fields=["critical_action_categories"])

    html = client.get(page_url(assignment)).content.decode()

    assert 'data-action-id="' not in html
    assert (
        "No critical actions were recorded in this window: its recorded actions "
        "are routine (below)." in html
    )
    assert sorted(re.findall(r'data-routine-action-id="(\d+)"', html)) == sorted(
        str(clinical[name].pk) for name in ("norepinephrine", "intubation", "insulin")
    )


def test_an_evidence_chip_keeps_the_name_of_the_event_table_after_a_reload(
    client, physician, assignment, stay
):
    """A chip is named by the event's concept, as the window's event table
    names it (annotate.js reads the row's data-event-name), not by its source
    label: "GCS total", never "gcs"."""
    gcs = make_event(
        admission=stay.admission,
        time=stay.intime + timedelta(minutes=18),
        domain=Domain.ASSESSMENTS,
        category="gcs_total",
        name="gcs",
        value_num=14,
        unit="",
        source_table="patient_assessments",
    )
    payload = {
        "status": "stable",
        "acute_problems": [],
        "action_ratings": [],
        "red_flags": [],
        "status_evidence": [gcs.pk],
    }
    assert post_label(client, assignment, "draft", payload, 0).status_code == 200

    html = client.get(page_url(assignment)).content.decode()

    row = re.search(rf'data-event-id="{gcs.pk}">.*?</tr>', html, re.S).group(0)
    assert 'data-event-name="GCS total"' in row
    chip = re.search(rf'data-evidence-id="{gcs.pk}"[^>]*>([^<]*)<', html).group(1)
    assert chip.strip() == "GCS total · 0.3 h"


def test_event_table_pages_in_place_on_the_annotation_page(
    client, physician, assignment, clinical
):
    response = client.get(
        page_url(assignment) + "?scope=stay", headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="window-events"')
    assert f'data-event-id="{clinical["lactate"].pk}"' in html
    assert "label-form" not in html


def test_a_reload_shows_the_saved_draft(client, physician, assignment, clinical):
    c = clinical
    payload = {
        "status": "stable",
        "acute_problems": [{"text": "Septic shock", "evidence": [c["lactate"].pk]}],
        "action_ratings": [
            {"event_id": c["intubation"].pk, "rating": "acceptable", "evidence": []}
        ],
        "red_flags": [{"text": "Avoid fluid overload", "evidence": []}],
    }
    response = post_label(client, assignment, "draft", payload, 0)
    assert response.status_code == 200
    assert response.json()["version"] == 1

    html = client.get(page_url(assignment)).content.decode()
    assert 'data-version="1"' in html
    assert re.search(r'name="status" value="stable"\s+checked', html)
    assert 'value="Septic shock"' in html
    assert 'value="Avoid fluid overload"' in html
    assert f'data-evidence-id="{c["lactate"].pk}"' in html
    assert "Lactate · -2.0 h" in html
    assert re.search(
        rf'name="rating-{c["intubation"].pk}" value="acceptable"\s+checked', html
    )
    assert not re.search(
        rf'name="rating-{c["norepinephrine"].pk}" value="\w+"\s+checked', html
    )


def test_other_physicians_assignment_is_404(client, physician, physicians, campaign):
    other = Assignment.objects.filter(annotator=physicians[1]).first()
    before = written_state()
    assert client.get(page_url(other)).status_code == 404
    response = post_label(client, other, "draft", {"status": "stable"}, 0)
    assert response.status_code == 404
    assert written_state() == before


def test_researcher_is_refused(client, researcher, assignment):
    client.force_login(researcher)
    before = written_state()
    assert client.get(page_url(assignment)).status_code in (403, 404)
    response = post_label(client, assignment, "draft", {"status": "stable"}, 0)
    assert response.status_code in (403, 404)
    assert written_state() == before


def test_unknown_assignment_is_404(client, physician, campaign):
    assert client.get("/annotate/999999/").status_code == 404


# Drafts -----------------------------------------------------------------------


def test_draft_saves_and_returns_the_new_version(client, physician, assignment):
    first = post_label(client, assignment, "draft", {"status": "improving"}, 0)
    assert first.status_code == 200
    body = first.json()
    assert body["ok"] is True and body["version"] == 1
    assert re.fullmatch(r"\d\d:\d\d:\d\d", body["saved_at"])
    second = post_label(client, assignment, "draft", {"status": "stable"}, 1)
    assert second.json()["version"] == 2
    label = Label.objects.get(assignment=assignment)
    assert (label.version, label.status) == (2, "stable")
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.DRAFT


def test_stale_version_is_refused_with_a_conflict_and_nothing_written(
    client, physician, assignment
):
    post_label(client, assignment, "draft", {"status": "improving"}, 0)
    post_label(client, assignment, "draft", {"status": "stable"}, 1)
    before = written_state()
    # A tab that loaded version 1 saves after another tab saved version 2.
    response = post_label(client, assignment, "draft", {"status": "deteriorating"}, 1)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "version_conflict"
    assert "changed in another tab" in body["message"]
    assert written_state() == before


def test_draft_with_an_item_too_long_shows_the_message_and_writes_nothing(
    client, physician, assignment
):
    before = written_state()
    payload = {"acute_problems": [{"text": "x" * 301, "evidence": []}]}
    response = post_label(client, assignment, "draft", payload, 0)
    assert response.status_code == 400
    body = response.json()
    assert body["errors"]["acute_problems"] == [
        "Acute problem 1 is 301 characters long; the limit is 300."
    ]
    assert written_state() == before


@pytest.mark.parametrize(
    "payload",
    ["{not json", "[" * 5000 + "]" * 5000, '{"status": ' + "9" * 5000 + "}"],
    ids=["not-json", "nested-5000-deep", "5000-digit-integer"],
)
def test_unreadable_payload_is_refused(client, physician, assignment, payload):
    before = written_state()
    response = client.post(
        reverse("annotation:draft", args=[assignment.pk]),
        {"payload": payload, "base_version": 0},
    )
    assert response.status_code == 400
    assert "could not be read" in response.json()["message"] + json.dumps(
        response.json()["errors"]
    )
    assert written_state() == before


# Submit -----------------------------------------------------------------------


def test_submit_redirects_to_the_next_assignment(
    client, physician, assignment, complete_payload
):
    queue = list(
        Assignment.objects.filter(annotator=physician).order_by("window__index")
    )
    assert queue[0] == assignment
    response = post_label(
        client, assignment, "submit", complete_payload, 0, submission_id="abc"
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == page_url(queue[1])
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.SUBMITTED


def test_submit_without_htmx_redirects(client, physician, assignment, complete_payload):
    response = client.post(
        reverse("annotation:submit", args=[assignment.pk]),
        {"payload": json.dumps(complete_payload), "base_version": 0},
    )
    assert response.status_code == 302


def test_double_submit_is_harmless(client, physician, assignment, complete_payload):
    first = post_label(
        client, assignment, "submit", complete_payload, 0, submission_id="click-1"
    )
    after_first = written_state()
    second = post_label(
        client, assignment, "submit", complete_payload, 0, submission_id="click-1"
    )
    assert first.status_code == second.status_code == 200
    assert second["HX-Redirect"] == first["HX-Redirect"]
    assert written_state() == after_first
    assert Label.objects.get(assignment=assignment).revisions.count() == 1


def test_submit_of_the_last_one_goes_back_to_the_queue(
    client, physician, campaign, complete_payload
):
    assignments = Assignment.objects.filter(annotator=physician).order_by(
        "window__index"
    )
    empty_window = {"status": "stable"}  # windows 1 and 2 have no actions
    for a in assignments[1:]:
        label_submit(
            annotator=physician,
            assignment_id=a.pk,
            payload=empty_window,
            base_version=0,
        )
    response = post_label(client, assignments[0], "submit", complete_payload, 0)
    assert response["HX-Redirect"] == reverse("annotation:queue")


def test_submit_with_missing_answers_shows_messages_by_field(
    client, physician, assignment, clinical
):
    before = written_state()
    payload = {
        "status": "",
        "acute_problems": [{"text": "  ", "evidence": []}],
        "action_ratings": [],
    }
    response = post_label(client, assignment, "submit", payload, 0)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["status"] == [
        "Choose the patient status: improving, stable or deteriorating."
    ]
    assert errors["acute_problems"] == [
        "Acute problem 1 is empty: write it or remove it."
    ]
    assert (
        "Rate every recorded critical action: 2 of 2 not rated yet"
        in (errors["action_ratings"][0])
    )
    assert written_state() == before


def test_evidence_from_another_stay_is_refused(client, physician, assignment, clinical):
    before = written_state()
    payload = {
        "acute_problems": [{"text": "Shock", "evidence": [clinical["foreign"].pk]}]
    }
    response = post_label(client, assignment, "draft", payload, 0)
    assert response.status_code == 400
    assert (
        "must come from this patient's stay"
        in response.json()["errors"]["acute_problems"][0]
    )
    assert written_state() == before


# Submitted labels ---------------------------------------------------------------


def test_submitted_label_is_read_only_with_a_reopen_button(
    client, physician, assignment, complete_payload, submitted
):
    html = client.get(page_url(assignment)).content.decode()
    assert "data-readonly" in html
    assert "data-reopen" in html
    assert "data-submit>" not in html
    assert re.search(r'value="Septic shock"\s+name="q"[^>]*disabled', html)
    # A draft from a stale tab is refused as a conflict.
    before = written_state()
    response = post_label(client, assignment, "draft", complete_payload, 1)
    assert response.status_code == 409
    assert written_state() == before


def test_a_closed_window_says_the_label_is_final_and_offers_no_reopen(
    client, physician, assignment, submitted
):
    from annotation.models import CampaignWindow

    CampaignWindow.objects.filter(
        campaign=assignment.campaign, window=assignment.window
    ).update(closed_at=assignment.campaign.created_at)
    html = client.get(page_url(assignment)).content.decode()
    assert "data-readonly" in html and "data-closed" in html
    assert "data-reopen" not in html


def test_reopen_turns_the_label_back_into_a_draft(
    client, physician, assignment, submitted
):
    response = client.post(reverse("annotation:reopen", args=[assignment.pk]))
    assert response.status_code == 302
    assert response["Location"] == page_url(assignment)
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.DRAFT
    html = client.get(page_url(assignment)).content.decode()
    assert "data-readonly" not in html
    assert 'data-version="2"' in html
    assert "Reopened" in html


def test_reopen_of_a_draft_shows_the_message(client, physician, assignment):
    response = client.post(
        reverse("annotation:reopen", args=[assignment.pk]), follow=True
    )
    assert "Only a submitted label can be reopened." in response.content.decode()


# Suggestions and escaping -------------------------------------------------------


def test_term_suggestions_come_from_own_and_submitted_labels(
    client, physician, physicians, campaign, complete_payload
):
    own = Assignment.objects.filter(annotator=physician).order_by("window__index")
    label_save_draft(
        annotator=physician,
        assignment_id=own[1].pk,
        payload={"acute_problems": [{"text": "Septic shock"}]},
        base_version=0,
    )
    response = client.get(
        reverse("annotation:suggest", args=[own[0].pk]),
        {"field": "acute_problems", "q": "sep"},
    )
    assert response.status_code == 200
    assert '<option value="Septic shock"' in response.content.decode()


def test_user_text_is_escaped(client, physician, physicians, assignment, campaign):
    script = '<script>alert("x")</script>'
    post_label(
        client,
        assignment,
        "draft",
        {"acute_problems": [{"text": script, "evidence": []}]},
        0,
    )
    html = client.get(page_url(assignment)).content.decode()
    assert script not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    # The same text submitted elsewhere comes back escaped as a suggestion.
    other = Assignment.objects.filter(annotator=physician).exclude(pk=assignment.pk)[0]
    label_save_draft(
        annotator=physician,
        assignment_id=other.pk,
        payload={"red_flags": [{"text": script}]},
        base_version=0,
    )
    response = client.get(
        reverse("annotation:suggest", args=[assignment.pk]),
        {"field": "red_flags", "q": "<script"},
    )
    assert script not in response.content.decode()


def test_nav_shows_my_queue_to_physicians_only(client, physician, researcher):
    assert "My queue" in client.get(reverse("annotation:queue")).content.decode()
    client.force_login(researcher)
    assert "My queue" not in client.get(reverse("windows:stay_list")).content.decode()


# Error pages --------------------------------------------------------------------


def test_unassigned_window_is_a_404_page_in_the_sites_look(
    client, physician, physicians, campaign
):
    other = Assignment.objects.filter(annotator=physicians[1]).first()
    response = client.get(page_url(other))
    assert response.status_code == 404
    assert "404.html" in [t.name for t in response.templates]
    html = response.content.decode()
    assert "Page not found" in html
    assert 'class="topbar"' in html and reverse("annotation:queue") in html
    # The same page whether the id exists or not: nothing to probe.
    unknown = client.get("/annotate/999999/")
    assert unknown.status_code == 404
    assert "404.html" in [t.name for t in unknown.templates]


def test_page_refused_to_a_researcher_is_a_403_page_with_the_reason(client, researcher):
    client.force_login(researcher)
    response = client.get(reverse("annotation:queue"))
    assert response.status_code == 403
    assert "403.html" in [t.name for t in response.templates]
    assert "Only physicians label windows." in response.content.decode()


def test_server_error_page_renders_without_a_request():
    from django.template.loader import render_to_string

    html = render_to_string("500.html")
    assert "Something went wrong on the server" in html
    assert "app.css" in html
