"""What ``manage.py serve`` hands its supervisor (issue 35, memory): web and
worker each run with two malloc arenas, and the worker with the embedding
model loaded on demand and given back once idle, unless the environment says
otherwise. The supervisor's own behaviour: tests/test_serve_supervisor.py."""

import json

import pytest
from django.core.management import call_command

from realicu_web.management.commands import serve


class Replaced(Exception):
    """serve replaced itself with the supervisor (os.execv)."""


def _spec(monkeypatch, settings, tmp_path) -> dict:
    settings.CELERY_BROKER_DIR = tmp_path / "broker"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/2"

    def execv(path, argv):
        raise Replaced(json.loads(argv[-1]))

    monkeypatch.setattr(serve.os, "execv", execv)
    with pytest.raises(Replaced) as replaced:
        call_command("serve", "--bind", "127.0.0.1:8999")
    spec = replaced.value.args[0]
    return {command["name"]: command for command in spec["commands"]}


def test_web_and_worker_run_with_two_malloc_arenas(monkeypatch, settings, tmp_path):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("REALICU_WORKER_MODEL_IDLE_SECONDS", raising=False)
    commands = _spec(monkeypatch, settings, tmp_path)

    assert set(commands) == {"web", "worker"}
    assert commands["web"]["env"] == {"MALLOC_ARENA_MAX": "2"}
    worker_env = commands["worker"]["env"]
    assert worker_env["MALLOC_ARENA_MAX"] == "2"
    assert worker_env["REALICU_MATCHER_WARM_UP"] == "false"
    assert worker_env["REALICU_WORKER_MODEL_IDLE_SECONDS"] == "300"
    assert "--pool" in commands["worker"]["argv"]
    assert commands["worker"]["argv"][
        commands["worker"]["argv"].index("--pool") + 1
    ] == ("threads")


def test_the_environment_overrides_the_memory_defaults(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    monkeypatch.setenv("REALICU_WORKER_MODEL_IDLE_SECONDS", "0")
    commands = _spec(monkeypatch, settings, tmp_path)

    assert commands["web"]["env"]["MALLOC_ARENA_MAX"] == "8"
    assert commands["worker"]["env"]["MALLOC_ARENA_MAX"] == "8"
    assert commands["worker"]["env"]["REALICU_WORKER_MODEL_IDLE_SECONDS"] == "0"
