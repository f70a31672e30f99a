"""The Oracle on a real model (issue 19): llama-cpp-python's server with
SmolLM2-135M-Instruct on loopback, behind a recording proxy. The backbone is
detected from the server (its tokenizer, its reply dialect: a JSON Schema in
``response_format``), the prompts fit the context window by the server's own
count, the labels are schema-valid with evidence among the prompt's ids, and
the recorded token counts are the server's. A backbone left at the default
window (larger than the server's) has its prompt refused once, compressed
further and sent again, and learns the window from the server's error."""

from __future__ import annotations

import pandas as pd
import pytest

from accounts.roles import Role
from annotation.services import campaign_create
from oracle import services
from oracle.models import (
    Backbone,
    OracleLabel,
    OracleLabelState,
    PromptTemplate,
    ReplyFormat,
)
from oracle.prompts import DEFAULT_INSTRUCTIONS, DEFAULT_SYSTEM
from oracle.services.tokens import prompt_budget
from tests.annotation.conftest import make_role_user
from tests.oracle.conftest import LLAMA_N_CTX
from tests.oracle.helpers import openai_backbone, run_unqueued
from tests.oracle.llm_server import MODEL_ALIAS, RecordingProxy
from windows.importers.clif import clif_import
from windows.models import Stay, Window
from windows.windowing import windows_build_many

pytestmark = [pytest.mark.llm, pytest.mark.django_db]

HOSPITALIZATION = "29079034"
GUIDANCE = (
    "Judge the window against the whole stay: weigh trends over single values, "
    "name the organ system of each problem, and cite the events that show it. "
)
REPLY_TOKENS = 200
# These tests judge the prompt's fit and the reply's schema, not the server's
# speed: on CI's two cores, shared with the other test process, one reply of
# SmolLM2 took over the default 120 s, and with no retry the label failed.
SLOW_SERVER_TIMEOUT = 900.0


@pytest.fixture
def demo_windows(tmp_path, clif_demo_dir):
    """Three sampled windows of one demo stay, in a campaign."""
    folder = tmp_path / "clif_one"
    folder.mkdir()
    hosp = pd.read_parquet(clif_demo_dir / "clif_hospitalization.parquet")
    patients = set(
        hosp[hosp["hospitalization_id"].astype(str) == HOSPITALIZATION][
            "patient_id"
        ].astype(str)
    )
    for path in sorted(clif_demo_dir.glob("clif_*.parquet")):
        table = pd.read_parquet(path)
        if "hospitalization_id" in table.columns:
            keep = table["hospitalization_id"].astype(str) == HOSPITALIZATION
        else:
            keep = table["patient_id"].astype(str).isin(patients)
        table[keep].to_parquet(folder / path.name)
    clif_import(directory=folder)
    stay = Stay.objects.order_by("pk").first()
    windows_build_many(stays=[stay], seed=7, per_stay=3)
    chosen = list(Window.objects.filter(stay=stay, sampled_gold=True).order_by("index"))
    assert len(chosen) == 3
    admin = make_role_user(Role.ADMIN)
    physicians = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    campaign = campaign_create(
        admin=admin, name="smollm2", windows=chosen, physicians=physicians
    )
    return admin, campaign, chosen


def test_smollm2_labels_fit_the_window_and_match_the_schema(llama_server, demo_windows):
    admin, campaign, windows = demo_windows
    proxy = RecordingProxy(llama_server.root).start()
    try:
        backbone = openai_backbone(
            admin,
            proxy.base_url,
            "smollm2",
            model=MODEL_ALIAS,
            detect=True,
            context_tokens=LLAMA_N_CTX,
            max_completion_tokens=REPLY_TOKENS,
            parameters={"temperature": 0},
            concurrency=1,
            max_retries=0,
            timeout_seconds=SLOW_SERVER_TIMEOUT,
        )
        # llama-cpp-python is recognised by its tokenizer endpoint.
        assert backbone.server_report["server"] == "llama-cpp-python"
        assert backbone.tokenizer == "llamacpp_python"
        assert backbone.reply_format == ReplyFormat.LLAMACPP_PYTHON
        run = run_unqueued(admin, backbone, "smollm2", campaign=campaign)
        assert services.oracle_run_execute_inline(run_id=run.pk) == "done"
    finally:
        proxy.stop()

    labels = list(OracleLabel.objects.filter(run=run).order_by("window_id"))
    assert len(labels) == len(windows)
    assert [label.error for label in labels] == [""] * len(windows)
    assert all(label.state == OracleLabelState.OK for label in labels)
    # Every request asked for the label's schema in llama-cpp-python's dialect,
    # with max_tokens, and the schema's evidence values are the prompt's ids.
    assert len(proxy.requests) == len(windows)
    for request in proxy.requests:
        assert request["max_tokens"] == REPLY_TOKENS
        assert request["response_format"]["type"] == "json_object"
        schema = request["response_format"]["schema"]
        allowed = set(schema["properties"]["status_evidence"]["items"]["enum"])
        prompt = "\n".join(m["content"] for m in request["messages"])
        assert all(f"[{pk}]" in prompt for pk in allowed)
    budget = prompt_budget(Backbone.objects.get(pk=backbone.pk))
    by_prompt = {}
    for request, reply in zip(proxy.requests, proxy.replies):
        by_prompt[reply["usage"]["prompt_tokens"]] = (request, reply)
    for label in labels:
        request, reply = by_prompt[label.prompt_tokens]
        # The recorded counts are the server's usage, and the prompt fitted.
        assert label.tokens_in == reply["usage"]["prompt_tokens"]
        assert label.tokens_out == reply["usage"]["completion_tokens"]
        assert 0 < label.prompt_tokens <= budget
        assert label.prompt_tokens + REPLY_TOKENS <= LLAMA_N_CTX
        assert not any("refused" in c for c in label.prompt_compressions)
        # The label is what the server said, valid against the prompt's ids.
        allowed = set(
            request["response_format"]["schema"]["properties"]["status_evidence"][
                "items"
            ]["enum"]
        )
        cited = set(label.payload["status_evidence"])
        for field in ("acute_problems", "added_actions", "red_flags", "action_ratings"):
            for item in label.payload[field]:
                cited |= set(item["evidence"])
        assert cited <= allowed
    calibration = Backbone.objects.get(pk=backbone.pk).calibration
    assert (
        calibration["observed"] == len(windows) and calibration["chars_per_token"] > 1
    )


def test_a_prompt_over_the_servers_window_is_compressed_and_sent_once_more(
    llama_server, demo_windows
):
    admin, campaign, windows = demo_windows
    backbone = openai_backbone(
        admin,
        llama_server.base_url,
        "smollm2 default window",
        model=MODEL_ALIAS,
        reply_format=ReplyFormat.LLAMACPP_PYTHON,
        max_completion_tokens=REPLY_TOKENS,
        parameters={"temperature": 0},
        concurrency=1,
        max_retries=0,
        timeout_seconds=SLOW_SERVER_TIMEOUT,
    )
    # Left empty, the window is the platform's default, twice the server's;
    # the run detects nothing it did not already know (no tokenizer asked).
    backbone.server_report = {"detected_at": "set by the test"}
    backbone.save(update_fields=["server_report"])
    # A template with long instructions: the prompt at the default window's
    # budget no longer fits the server's.
    template = PromptTemplate.objects.create(
        version="long instructions",
        system=DEFAULT_SYSTEM,
        instructions=DEFAULT_INSTRUCTIONS + "\n\n" + GUIDANCE * 12,
    )
    run = run_unqueued(admin, backbone, "overflow", prompt=template, campaign=campaign)
    services.oracle_run_execute_chunk(run_id=run.pk, chunk_size=1)
    [label] = OracleLabel.objects.filter(run=run)
    assert label.attempts >= 2, label.error
    assert any("refused" in c for c in label.prompt_compressions), (
        label.prompt_compressions,
        label.prompt_tokens,
        label.prompt_estimate,
        label.error,
        label.raw_response[:300],
    )
    assert label.state == OracleLabelState.OK, label.error
    assert 0 < label.prompt_tokens <= LLAMA_N_CTX - REPLY_TOKENS
    backbone.refresh_from_db()
    assert backbone.context_tokens == LLAMA_N_CTX
    assert "error" in backbone.server_report["context_tokens_from"]
