"""manage.py agent_run and online_eval, --inline: a run to the end with its
summary line, and clear errors for a wrong release, backbone or URL."""

import io

import pytest
from django.core.management import CommandError, call_command

from agents.models import AgentRun, RunState
from tests.agents.endpoint_server import Endpoint

pytestmark = pytest.mark.django_db


def test_agent_run_inline(fake_llm, fake_backbone, tiny_release, admin_user):
    out = io.StringIO()
    call_command(
        "agent_run",
        "--agent",
        "local-window",
        "--release",
        str(tiny_release.pk),
        "--backbone",
        str(fake_backbone.pk),
        "--inline",
        "--user",
        admin_user.username,
        stdout=out,
    )
    run = AgentRun.objects.get()
    assert run.state == RunState.DONE and run.windows_done == 4
    text = out.getvalue()
    assert f"Agent run {run.pk} (local-window, predictor-v2, fake-llm)" in text
    assert "4/4 windows (0 failed), tokens in 4,000" in text
    assert "Baseline submission" in text and "Scored" in text
    assert len(fake_llm.requests) == 4


def test_agent_run_refuses_a_wrong_backbone_or_release(
    fake_backbone, tiny_release, admin_user
):
    with pytest.raises(CommandError, match="No backbone"):
        call_command(
            "agent_run",
            "--agent=rag",
            f"--release={tiny_release.pk}",
            "--backbone=nope",
            f"--user={admin_user.username}",
        )
    with pytest.raises(CommandError, match="No release"):
        call_command(
            "agent_run",
            "--agent=rag",
            "--release=999999",
            f"--backbone={fake_backbone.pk}",
            f"--user={admin_user.username}",
        )
    assert not AgentRun.objects.exists()


def test_online_eval_inline(tiny_release, researcher):
    endpoint = Endpoint()
    try:
        out = io.StringIO()
        call_command(
            "online_eval",
            f"--release={tiny_release.pk}",
            f"--endpoint={endpoint.url}",
            "--inline",
            f"--user={researcher.username}",
            stdout=out,
        )
    finally:
        endpoint.stop()
    run = AgentRun.objects.get()
    assert run.endpoint.url == endpoint.url and run.state == RunState.DONE
    assert len(endpoint.received) == 4
    assert "4/4 windows (0 failed)" in out.getvalue()
    with pytest.raises(CommandError, match="refused"):
        call_command(
            "online_eval",
            f"--release={tiny_release.pk}",
            "--endpoint=http://169.254.169.254/x",
            f"--user={researcher.username}",
        )


def test_online_eval_with_failed_windows_exits_non_zero_with_the_reasons(
    tiny_release, researcher
):
    """Issue 32: a run whose windows failed is not a success for a script."""
    endpoint = Endpoint()
    endpoint.replies = [(200, {"status": "bogus"}, {})]
    try:
        with pytest.raises(CommandError, match=r"1 of 4 windows failed \(1 × "):
            call_command(
                "online_eval",
                f"--release={tiny_release.pk}",
                f"--endpoint={endpoint.url}",
                "--inline",
                "--retries=0",
                f"--user={researcher.username}",
                stdout=io.StringIO(),
            )
    finally:
        endpoint.stop()
    run = AgentRun.objects.get()
    assert run.windows_failed == 1 and run.windows_done == 4
    assert "bogus" in run.predictions.exclude(error="").get().error


def test_agent_run_whose_every_window_failed_exits_non_zero(
    fake_llm, fake_backbone, tiny_release, admin_user
):
    for _ in range(8):
        fake_llm.push(content='{"status": "bad status"}')
    with pytest.raises(CommandError, match="No window was predicted"):
        call_command(
            "agent_run",
            "--agent=local-window",
            f"--release={tiny_release.pk}",
            f"--backbone={fake_backbone.pk}",
            "--inline",
            f"--user={admin_user.username}",
            stdout=io.StringIO(),
        )
    assert AgentRun.objects.get().state == RunState.FAILED
