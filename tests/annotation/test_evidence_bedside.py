"""Evidence is bedside (issue 30, spec sections 1 and 3): a label may not cite a
hindsight record (a code assigned after discharge, a discharge summary, an
outcome) nor an event outside the window's stay, in a draft, a submit, an
adjudication decision or a merge; and a release built from a consensus whose
labels cite one (saved before the rule) carries none of them."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse

from annotation.evidence import evidence_refused, hindsight_records
from annotation.models import (
    AdjudicationDecision,
    ConsensusLabel,
    Label,
    LabelRevision,
)
from annotation.services import window_consensus_refresh
from tests.factories import coded_procedure, death, discharge_summary, make_event

from .helpers import draft_as, submit_as, written_state

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PROBLEMS = "acute_problems"

# What each kind is refused as, in the message.
REASONS = {
    "coded": "is a record coded after discharge (ICD10PCS 5A1955Z)",
    "discharge_summary": "is a discharge summary",
    "outcome": "is an outcome (Death)",
    "after_the_stay": "does not belong to it",
    "other_admission": "does not belong to it",
}


@pytest.fixture
def records(stay, clinical):
    """One event of each kind a label may not cite, all but the last two
    stamped inside the stay (so that they are refused for what they are, not
    for when): a procedure code billed during the window, a discharge summary,
    a death, a heart rate on the ward a day after ICU discharge, and an event
    of another admission."""
    return {
        "coded": coded_procedure(stay, 12 / 60, source_table="procedures_icd"),
        "discharge_summary": discharge_summary(
            stay, 2, "Discharged home on day 9 after septic shock."
        ),
        "outcome": death(stay, 3, value_num=None, unit="", source_table="patients"),
        "after_the_stay": make_event(
            admission=stay.admission, time=stay.outtime + timedelta(days=1)
        ),
        "other_admission": clinical["foreign"],
    }


def _forged(client, assignment, action: str, payload: dict, base_version):
    """A plain form post, as a forger sends it (no htmx header)."""
    return client.post(
        reverse(f"annotation:{action}", args=[assignment.pk]),
        {"payload": json.dumps(payload), "base_version": base_version},
    )


def _citing(payload: dict, event_id: int, field: str = PROBLEMS) -> dict:
    payload = json.loads(json.dumps(payload))
    if field == "status_evidence":
        payload["status_evidence"].append(event_id)
    elif field == "action_ratings":
        payload["action_ratings"][1]["evidence"].append(event_id)
    else:
        payload[field][0]["evidence"].append(event_id)
    return payload


# Drafts and submits ------------------------------------------------------------


@pytest.mark.parametrize("kind", REASONS)
@pytest.mark.parametrize("action", ["draft", "submit"])
def test_a_forged_label_citing_a_hindsight_record_is_refused_and_nothing_written(
    client, physicians, assignment, complete_payload, records, kind, action
):
    draft = draft_as(physicians[0], assignment, complete_payload)
    before = written_state()
    client.force_login(physicians[0])

    response = _forged(
        client,
        assignment,
        action,
        _citing(complete_payload, records[kind].pk),
        draft.version,
    )

    assert response.status_code == 400
    body = response.json()
    assert body["ok"] is False
    message = " ".join(body["errors"][PROBLEMS])
    assert f"event {records[kind].pk} {REASONS[kind]}" in message
    assert written_state() == before
    assert Label.objects.get(pk=draft.pk).version == draft.version


@pytest.mark.parametrize(
    "field", ["status_evidence", "acute_problems", "red_flags", "action_ratings"]
)
def test_every_field_refuses_a_discharge_summary(
    physicians, assignment, complete_payload, records, field
):
    from django.core.exceptions import ValidationError

    summary = records["discharge_summary"].pk
    with pytest.raises(ValidationError) as refused:
        draft_as(physicians[0], assignment, _citing(complete_payload, summary, field))
    assert f"event {summary} is a discharge summary" in " ".join(
        refused.value.message_dict[field]
    )
    assert "Hindsight records" in " ".join(refused.value.message_dict[field])
    assert not Label.objects.exists()


def test_rating_an_outcome_as_an_action_is_refused_in_a_draft(
    physicians, assignment, complete_payload, records
):
    from django.core.exceptions import ValidationError

    death = records["outcome"].pk
    payload = {
        **complete_payload,
        "action_ratings": [{"event_id": death, "rating": "", "evidence": []}],
    }
    with pytest.raises(ValidationError) as refused:
        draft_as(physicians[0], assignment, payload)
    assert f"event {death} is an outcome (Death)" in " ".join(
        refused.value.message_dict["action_ratings"]
    )


def test_bedside_evidence_of_the_stay_is_still_accepted(
    physicians, assignment, complete_payload, clinical, stay
):
    # The look-back before ICU admission (the lactate, 2 h before) and a heart
    # rate charted at ICU discharge are of the stay.
    at_discharge = make_event(admission=stay.admission, time=stay.outtime)
    payload = _citing(complete_payload, at_discharge.pk)

    label = submit_as(physicians[0], assignment, payload)

    assert at_discharge.pk in label.payload[PROBLEMS][0]["evidence"]
    assert clinical["lactate"].pk in label.payload["status_evidence"]


def test_the_rule_is_one_selector_for_labels_and_releases(
    stay, gold_windows, records, clinical
):
    hindsight = set(hindsight_records(admission_id=stay.admission_id))
    assert {e.pk for e in hindsight} == {
        records["coded"].pk,
        records["discharge_summary"].pk,
        records["outcome"].pk,
    }
    refused = evidence_refused(
        window=gold_windows[0],
        ids=[e.pk for e in records.values()] + [clinical["lactate"].pk],
    )
    assert set(refused) == {e.pk for e in records.values()}


# Adjudication ----------------------------------------------------------------


def _labels_citing(physicians, campaign, window, complete_payload, clinical, ids):
    """Two submitted labels of the window that disagree on the status and on a
    problem each, then rewritten in the database to cite ``ids`` as labels
    saved before the rule could (their status evidence, and each problem)."""
    second = {
        **complete_payload,
        "status": "stable",
        PROBLEMS: [{"text": "Pneumothorax", "evidence": [clinical["heart_rate"].pk]}],
    }
    first = {
        **complete_payload,
        PROBLEMS: [{"text": "Septic shock", "evidence": [clinical["lactate"].pk]}],
    }
    for physician, payload in zip(physicians, (first, second), strict=True):
        assignment = campaign.assignments.get(annotator=physician, window=window)
        submit_as(physician, assignment, payload)
    for label in Label.objects.filter(assignment__window=window):
        payload = label.payload
        payload["status_evidence"] += ids
        for item in payload[PROBLEMS]:
            item["evidence"] += ids
        Label.objects.filter(pk=label.pk).update(payload=payload)


@pytest.fixture
def disputed(request, physicians, campaign, gold_windows, complete_payload, clinical):
    """Window 0 of the campaign in dispute, its labels citing ``request.param``
    (a kind of REASONS), agreement and consensus computed."""
    matcher = request.getfixturevalue("matcher")
    records = request.getfixturevalue("records")
    kind = request.param
    window = gold_windows[0]
    _labels_citing(
        physicians, campaign, window, complete_payload, clinical, [records[kind].pk]
    )
    window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    return {"window": window, "kind": kind, "event": records[kind]}


def _snapshot(campaign, window):
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    return (
        AdjudicationDecision.objects.count(),
        consensus.items,
        consensus.status,
        consensus.open_disputes,
        LabelRevision.objects.count(),
        sorted(Label.objects.values_list("pk", "version")),
    )


def _problem_refs(campaign, window) -> list[str]:
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    return [d["item_ref"] for d in consensus.open_disputes if d["task"] == PROBLEMS]


def _refused(admin_client, campaign, window, view, form, **headers) -> str:
    """Posts ``form`` to the window's adjudication ``view`` (decide, merge): it
    is refused (400; over htmx 200, which htmx swaps in) and writes nothing (no
    decision, the consensus and labels as they were). Returns the page's text."""
    before = _snapshot(campaign, window)
    response = admin_client.post(
        reverse(f"annotation:adjudication_{view}", args=[campaign.pk, window.pk]),
        form,
        **headers,
    )
    assert response.status_code == (200 if headers == HTMX else 400)
    assert _snapshot(campaign, window) == before
    return response.content.decode()


ADJUDICATED_KINDS = ["coded", "discharge_summary", "outcome", "after_the_stay"]


@pytest.mark.parametrize("disputed", ADJUDICATED_KINDS, indirect=True)
def test_accepting_an_item_citing_a_hindsight_record_is_refused(
    admin_client, campaign, disputed
):
    window, event = disputed["window"], disputed["event"]
    refs = _problem_refs(campaign, window)
    assert len(refs) == 2

    accept = {"task": PROBLEMS, "item_ref": refs[0], "action": "accept", "reason": "ok"}
    html = _refused(admin_client, campaign, window, "decide", accept)
    rewrite = {
        "task": PROBLEMS,
        "item_ref": refs[1],
        "action": "rewrite",
        "new_text": "Shock",
        "reason": "clearer",
    }
    rewritten = _refused(admin_client, campaign, window, "decide", rewrite, **HTMX)

    reason = REASONS[disputed["kind"]].replace("does not belong to it", "is not of")
    assert f"event {event.pk} {reason}" in html
    assert "Drop the item instead" in html
    assert "Drop the item instead" in rewritten


@pytest.mark.parametrize("disputed", ["discharge_summary"], indirect=True)
def test_merging_items_citing_a_hindsight_record_is_refused(
    admin_client, campaign, disputed
):
    window, event = disputed["window"], disputed["event"]

    merge = {
        "task": PROBLEMS,
        "item_ref": _problem_refs(campaign, window),
        "new_text": "Shock",
        "reason": "same finding",
    }
    html = _refused(admin_client, campaign, window, "merge", merge)

    assert f"event {event.pk} is a discharge summary" in html


@pytest.mark.parametrize("disputed", ["outcome"], indirect=True)
def test_settling_the_status_on_evidence_citing_an_outcome_is_refused(
    admin_client, campaign, disputed
):
    window, event = disputed["window"], disputed["event"]

    settle = {
        "task": "status",
        "action": "settle_status",
        "new_status": "stable",
        "reason": "trend",
    }
    html = _refused(admin_client, campaign, window, "decide", settle)

    assert f"event {event.pk} is an outcome (Death)" in html
    assert "ask a third physician or drop the window" in html


@pytest.mark.parametrize("disputed", ["coded"], indirect=True)
def test_dropping_an_item_citing_a_hindsight_record_is_the_way_out(
    admin_client, campaign, disputed
):
    window = disputed["window"]
    ref = _problem_refs(campaign, window)[0]

    response = admin_client.post(
        reverse("annotation:adjudication_decide", args=[campaign.pk, window.pk]),
        {"task": PROBLEMS, "item_ref": ref, "action": "drop", "reason": "hindsight"},
    )

    assert response.status_code == 302
    assert AdjudicationDecision.objects.get().action == "drop"


@pytest.mark.parametrize("disputed", ["discharge_summary"], indirect=True)
def test_evidence_posted_with_a_decision_is_not_read(admin_client, campaign, disputed):
    # A forger adds evidence fields to a decision: the form has none, and a
    # decision that carries nothing (a drop) records none of them.
    window, event = disputed["window"], disputed["event"]
    ref = _problem_refs(campaign, window)[1]

    admin_client.post(
        reverse("annotation:adjudication_decide", args=[campaign.pk, window.pk]),
        {
            "task": PROBLEMS,
            "item_ref": ref,
            "action": "drop",
            "reason": "x",
            "evidence": [event.pk],
            "new_evidence": event.pk,
        },
    )

    decision = AdjudicationDecision.objects.get()
    assert str(event.pk) not in json.dumps(decision.context.get("dispute") or {})
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    kept = [i for items in consensus.items.values() for i in items]
    assert all(event.pk not in item["evidence"] for item in kept)


# Releases ---------------------------------------------------------------------


def test_a_release_built_from_a_consensus_carries_no_hindsight_record(
    settings,
    tmp_path,
    admin_user,
    physicians,
    campaign,
    gold_windows,
    complete_payload,
    clinical,
    records,
    matcher,
):
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.services import release_create

    settings.REALICU_RELEASES_DIR = tmp_path / "releases"
    window = gold_windows[0]
    hindsight = [records[k].pk for k in ("coded", "discharge_summary", "outcome")]
    # Both physicians agree (status and problem): kept without any decision.
    for physician in physicians:
        assignment = campaign.assignments.get(annotator=physician, window=window)
        submit_as(physician, assignment, complete_payload)
    for label in Label.objects.filter(assignment__window=window):
        payload = label.payload
        payload["status_evidence"] += hindsight
        for field in (PROBLEMS, "added_actions", "red_flags"):
            for item in payload[field]:
                item["evidence"] += hindsight
        payload["action_ratings"][0]["evidence"] += hindsight
        Label.objects.filter(pk=label.pk).update(payload=payload)
    window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    consensus = ConsensusLabel.objects.get(campaign=campaign, window=window)
    assert consensus.dispute_count == 0
    assert set(hindsight) <= set(consensus.status_evidence)

    release = release_build(
        release=release_create(
            user=admin_user, kind=ReleaseKind.GOLD, campaign=campaign
        )
    )

    folder = settings.REALICU_RELEASES_DIR / release.name
    lines = (folder / "windows.jsonl").read_text().splitlines()
    (record,) = [json.loads(line) for line in lines]
    labels = record["labels"]
    cited = set(labels["status"]["evidence"])
    for task in ("acute_problems", "recommended_actions", "red_flags"):
        assert labels[task], task
        for item in labels[task]:
            cited.update(item["evidence"])
    assert not cited & set(hindsight)
    assert clinical["lactate"].pk in cited  # the bedside evidence stays
    context = (folder / record["context_file"]).read_text()
    ids = {json.loads(line)["event_id"] for line in context.splitlines()}
    assert not ids & set(hindsight)
