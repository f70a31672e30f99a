"""What running on a real, slow model showed (issue 32): items must be
clinical text, requests are visible on the run page as they happen, the
timeout follows the server's measured speed, a failed server check is shown
and asked again, and budget errors cite the README's formula."""

import json

import jsonschema
import pytest
from django.urls import reverse

from oracle import services
from oracle.backbones.openai_compat import RequestEvent
from oracle.models import Backbone, BackboneKind, OracleRun
from oracle.prompts import prompt_build
from oracle.schema import (
    ReplyError,
    clinical_text_problem,
    reply_parse,
    reply_schema_for,
)
from oracle.services.backbones import backbone_detect_if_new
from oracle.services.tokens import budget_text, estimate_error, prompt_budget_parts
from tests.oracle.fake_llm import valid_reply_for
from tests.oracle.helpers import backbone, openai_backbone, run_unqueued

pytestmark = pytest.mark.django_db

JUNK = [
    "...",
    "stall-dur%20fiz#DKC5kq8MzP",
    "-- --",
    "12.5 / 7",
    "a{b}c words",
    "ok 12.5/13.7/88.1-90.2",
    "Oliguria DKC5kq8MzP",
    # SmolLM2's recommended action on a demo window (icu-evo).
    "Echocardiogram, EKG or ECHO; EpuN23A/PBE; PD",
]
CLINICAL = [
    "Septic shock",
    "MAP < 65 mmHg despite fluids",
    "Norepinephrine 0.1 mcg/kg/min",
    "SpO2 88% on 6 L/min",
    "Start broad-spectrum antibiotics",
    "fever (38.3 °C)",
    # SmolLM2's acute problem on a demo window, refused by the first rule
    # (any 8 characters mixing cases and digits) as random-looking.
    "hemoglobin: 10.8g/dL",
    "PaO2/FiO2 ratio 180 on HbA1c-controlled diabetes",
    "NaHCO3 and MgSO4 replaced, CHA2DS2-VASc 4, COVID19 negative",
]


@pytest.mark.parametrize("text", JUNK)
def test_punctuation_and_noise_are_not_clinical_text(text):
    assert clinical_text_problem(text)


@pytest.mark.parametrize("text", CLINICAL)
def test_clinical_phrases_are_clinical_text(text):
    assert clinical_text_problem(text) == ""


def test_the_reply_schema_holds_items_to_clinical_text():
    schema = reply_schema_for(event_ids=[1, 2], recorded_ids=[])

    def reply(text):
        return {
            "status": "stable",
            "status_evidence": [1],
            "acute_problems": [{"text": text, "evidence": [1]}],
            "action_ratings": [],
            "added_actions": [],
            "red_flags": [],
        }

    # The decoder's pattern keeps to ASCII (a small vocabulary's safe set);
    # the server-side check reads any script.
    for text in [t for t in CLINICAL if t.isascii()]:
        jsonschema.validate(reply(text), schema)
    for text in ("...", "stall-dur%20fiz#DKC5kq8MzP", "#x"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(reply(text), schema)


def test_a_reply_with_a_junk_item_is_refused_with_the_reason(contexts, template):
    context = contexts[1]
    reply = json.loads(
        valid_reply_for(prompt_build(context=context, template=template).messages)
    )
    reply["added_actions"] = [
        {"text": "stall-dur%20fiz#DKC5kq8MzP", "evidence": reply["status_evidence"]}
    ]
    with pytest.raises(ReplyError, match=r"Added action 1 .* holds characters"):
        reply_parse(json.dumps(reply), context=context)


def test_a_junk_item_gets_the_repair_turn_and_never_becomes_a_label(
    fake_llm, template, contexts
):
    context = contexts[1]
    good = json.loads(
        valid_reply_for(prompt_build(context=context, template=template).messages)
    )
    junk = {**good, "acute_problems": [{"text": "...", "evidence": []}]}
    fake_llm.push(content=json.dumps(junk))
    fake_llm.push(content=json.dumps(good))

    [result] = backbone(fake_llm, template).label_many([context])

    assert result.ok and result.attempts == 2
    assert [p["text"] for p in result.payload["acute_problems"]] == [
        "haemodynamic monitoring needed"
    ]
    repair = fake_llm.requests[1].body["messages"][-1]["content"]
    assert "Acute problem 1 ('...') has no word" in repair


def test_requests_timeouts_and_retries_are_reported_as_they_happen(
    fake_llm, template, contexts
):
    context = contexts[0]
    fake_llm.push(content="{}", delay=1.0)
    fake_llm.push(status=503)
    good = valid_reply_for(prompt_build(context=context, template=template).messages)
    fake_llm.push(content=good)
    events: list[RequestEvent] = []

    [result] = backbone(
        fake_llm, template, timeout_seconds=0.3, max_retries=3
    ).label_many([context], on_request=events.append)

    assert result.ok and result.attempts == 3
    kinds = [e.kind for e in events]
    assert kinds.count("sent") == 3 and kinds.count("retry") == 2
    assert kinds.count("timed_out") == 1 and kinds.count("errored") == 1
    assert kinds.count("answered") == 1
    retry = next(e for e in events if e.kind == "retry")
    assert "retry 1 of 3" in retry.detail and "timed out" in retry.detail


def test_the_timeout_follows_the_measured_speed_and_doubles_after_a_timeout(
    fake_llm, template
):
    labeller = backbone(
        fake_llm,
        template,
        timeout_seconds=120,
        max_completion_tokens=512,
        tokens_per_second=1.0,
        timeout_max_seconds=1800,
    )
    # 512 reply tokens at 1 token/s, twice over.
    assert labeller.request_timeout() == 1024
    assert labeller.request_timeout(timeouts=1) == 1800  # capped
    fast = backbone(fake_llm, template, timeout_seconds=120, max_completion_tokens=512)
    assert fast.request_timeout() == 120
    assert fast.request_timeout(timeouts=2) == 120  # no cap above the timeout
    fast.timeout_max_seconds = 600
    assert fast.request_timeout(timeouts=2) == 480


def test_a_run_page_shows_requests_before_any_window_is_labelled(
    client, admin_user, cohort_data, fake_llm
):
    cohort, _, _ = cohort_data
    backbone_row = openai_backbone(
        admin_user,
        fake_llm.base_url,
        "slow",
        concurrency=1,
        max_retries=0,
        timeout_seconds=0.3,
    )
    backbone_row.server_report = {"detected_at": "set by the test"}
    backbone_row.save(update_fields=["server_report"])
    fake_llm.push(content="{}", delay=1.0)
    run = run_unqueued(admin_user, backbone_row, "slow", cohort=cohort)
    services.oracle_run_execute_chunk(run_id=run.pk, chunk_size=1)
    run.refresh_from_db()
    assert run.requests_sent >= 1 and run.requests_timed_out == 1
    assert "timed out" in run.request_problem
    client.force_login(admin_user)
    page = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    assert "1 timed out" in page and "Last problem" in page


def test_a_failed_server_check_is_shown_and_asked_again_at_run_start(
    client, admin_user, fake_llm
):
    row = Backbone.objects.create(
        name="unasked",
        kind=BackboneKind.OPENAI,
        base_url=fake_llm.base_url,
        model="fake",
        server_report={
            "server": "",
            "error": "The server could not be asked (ReadTimeout).",
            "detected_at": "2026-11-27T10:00:00+00:00",
        },
    )
    client.force_login(admin_user)
    page = client.get(reverse("oracle:backbone_list")).content.decode()
    assert "Not checked: The server could not be asked (ReadTimeout)." in page
    assert "asked again when a run starts" in page

    backbone_detect_if_new(backbone_id=row.pk)

    row.refresh_from_db()
    assert "error" not in row.server_report  # asked again, and answered
    assert row.server_report["detected_at"] != "2026-11-27T10:00:00+00:00"


def test_the_budget_is_cited_as_the_readmes_formula(settings):
    settings.REALICU_LLM_DEFAULT_CONTEXT_TOKENS = 4096
    settings.REALICU_LLM_PROMPT_MARGIN_TOKENS = 64
    row = Backbone(kind=BackboneKind.OPENAI, max_completion_tokens=768)
    parts = prompt_budget_parts(row)
    assert parts["budget"] == 4096 - 768 - 64 == 3264
    assert budget_text(parts) == ("3264 (context window 4096 - reply 768 - margin 64)")


def test_a_prompt_over_budget_fails_citing_the_budget_not_a_compression_target(
    fake_llm, template, contexts
):
    labeller = backbone(
        fake_llm,
        template,
        prompt_budget=40,
        budget_formula="40 (context window 300 - reply 196 - margin 64)",
    )
    [result] = labeller.label_many([contexts[1]])
    assert not result.ok and not fake_llm.requests
    assert "does not fit its budget of 40 (context window 300" in result.error


def test_the_estimate_error_is_measured_against_the_servers_count(
    admin_user, cohort_data, fake_llm
):
    cohort, _, _ = cohort_data
    row = openai_backbone(admin_user, fake_llm.base_url, "counted")
    run = services.oracle_run_create(
        admin=admin_user, name="e", backbone=row, cohort=cohort, enqueue=False
    )
    services.oracle_run_execute_inline(run_id=run.pk)
    run = OracleRun.objects.get(pk=run.pk)
    # The fake server counts 1000 prompt tokens for every prompt.
    labels = run.labels.all()
    error = estimate_error(labels)
    estimates = sorted(labels.values_list("prompt_estimate", flat=True))
    assert error["count"] == labels.count()
    assert error["worst_under"] == round(min(0.0, (estimates[0] - 1000) / 10), 1)
    assert error["under"] == sum(1 for e in estimates if e < 1000)
