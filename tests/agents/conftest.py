"""Fixtures of the agents' tests: the exports tests' tiny release (three stays,
four windows, an event at a window's end, one after, and outcome events), the
fake OpenAI-compatible server, a backbone pointing at it, and a researcher's
endpoint. Endpoints on loopback are allowed, as an operator allows a network
for them (REALICU_ENDPOINT_ALLOWED_NETWORKS): the test endpoints run on
127.0.0.1."""

import pytest

from tests.agents.endpoint_server import Endpoint
from tests.agents.helpers import fake_backbone_row
from tests.exports.conftest import (  # noqa: F401 - fixtures
    release_dirs,
    tiny_labels,
    tiny_release,
    tiny_run,
    tiny_stays,
)
from tests.oracle.fake_llm import FakeLLM
from tests.oracle.helpers import started


@pytest.fixture(autouse=True)
def _loopback_endpoints_allowed(settings):
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def endpoint():
    """A researcher's endpoint on loopback (tests/agents/endpoint_server.py),
    started as it is made."""
    server = Endpoint()
    yield server
    server.stop()


@pytest.fixture
def fake_llm():
    with started(FakeLLM(latency=0.0)) as fake:
        yield fake


@pytest.fixture
def fake_backbone(db, fake_llm):
    return fake_backbone_row(
        fake_llm.base_url,
        "fake-llm",
        price_per_million_input=1.0,
        price_per_million_output=2.0,
    )
