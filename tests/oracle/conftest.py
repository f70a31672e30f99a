"""Fixtures of the Oracle tests: the fake OpenAI-compatible server on loopback."""

import pytest

from tests.oracle.fake_llm import FakeLLM


@pytest.fixture
def fake_llm():
    """A FakeLLM started for one test (default mode: valid replies, no latency)
    and stopped after it; see tests/oracle/fake_llm.py."""
    fake = FakeLLM(latency=0.0).start()
    try:
        yield fake
    finally:
        fake.stop()
