"""Forged forms, each role's world as in test_forged_requests.py: malformed
label posts, a forged time on task, bad backbones, campaigns, calibration
draws, judgments and taus, bad prediction files, import paths outside the
roots and NUL bytes are refused with a message, answer no 500, and write
nothing (row counts of every model of the site's apps unchanged)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import CalibrationPair, Label
from annotation.services import MAX_ACTIVE_SECONDS_PER_SAVE
from tests.forged import (  # noqa: F401 - fixtures among them
    _isolated,
    call,
    client_for,
    model_counts,
    world,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "form",
    [
        {"payload": "{not json"},
        {"payload": "[]", "base_version": "0"},
        {"payload": '{"status": 5}', "base_version": "x"},
        {"payload": '{"status": "stable"}', "base_version": "99999999999999999999"},
        {"payload": '{"status": "stable"}', "base_version": "-1"},
        {"payload": '{"acute_problems": "text"}', "base_version": "0"},
        {
            "payload": '{"acute_problems": [{"text": 3, "evidence": "x"}]}',
            "base_version": "0",
        },
    ],
)
@pytest.mark.parametrize("endpoint", ("annotation:draft", "annotation:submit"))
def test_malformed_label_forms_get_a_clear_4xx_and_change_nothing(
    world, form, endpoint
):
    client = client_for(world, "physician")
    url = reverse(endpoint, args=[world["ids"]["assignment_id"]])
    before = model_counts()
    response, error = call(client, "post", url, form)
    assert error is None, error
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["message"]
    assert model_counts() == before


@pytest.mark.parametrize("seconds", ["NaN", "1e400", "-5", "99999999999999999999"])
def test_a_forged_time_on_task_is_bounded_and_unknown_payload_keys_are_dropped(
    world, seconds
):
    """The seconds of work are the page's own counter: a forged value never
    blocks the save (the physician's work is kept) but counts as nothing."""
    client = client_for(world, "physician")
    url = reverse("annotation:draft", args=[world["ids"]["assignment_id"]])
    response = client.post(
        url,
        {
            "payload": '{"status": "stable", "injected": {"oracle": 1}}',
            "base_version": "0",
            "active_seconds": seconds,
        },
    )
    assert response.status_code == 200
    label = Label.objects.get(assignment_id=world["ids"]["assignment_id"])
    assert "injected" not in label.payload
    assert 0 <= label.time_on_task_seconds <= MAX_ACTIVE_SECONDS_PER_SAVE


BACKBONE_OK = {
    "name": "gpt",
    "kind": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "m",
    "api_key_env": "OPENAI_API_KEY",
    "parameters": '{"temperature": 0}',
    "timeout_seconds": "60",
    "max_retries": "2",
    "concurrency": "4",
    "requests_per_minute": "60",
    "price_per_million_input": "0",
    "price_per_million_output": "0",
}


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"base_url": "not a url"}, "base_url"),
        ({"base_url": "file:///etc/passwd"}, "base_url"),
        ({"base_url": "ftp://example.org/v1"}, "base_url"),
        ({"base_url": "javascript:alert(1)"}, "base_url"),
        ({"parameters": "[1, 2]"}, "parameters"),
        ({"parameters": '"temperature"'}, "parameters"),
        ({"parameters": "{bad"}, "parameters"),
        (
            {"parameters": '{"messages": [{"role": "system", "content": "x"}]}'},
            "parameters",
        ),
        ({"parameters": '{"model": "other"}'}, "parameters"),
        ({"parameters": '{"stream": true}'}, "parameters"),
        ({"api_key_env": "sk-live-0123456789abcdef"}, "api_key_env"),
        ({"api_key_env": "OPENAI KEY"}, "api_key_env"),
        ({"api_key_env": "1KEY"}, "api_key_env"),
        ({"concurrency": "-1"}, "concurrency"),
        ({"concurrency": "0"}, "concurrency"),
        ({"concurrency": "99999999999"}, "concurrency"),
        ({"requests_per_minute": "-5"}, "requests_per_minute"),
        ({"requests_per_minute": "99999999999999"}, "requests_per_minute"),
        ({"max_retries": "-1"}, "max_retries"),
        ({"timeout_seconds": "-1"}, "timeout_seconds"),
        ({"timeout_seconds": "nan"}, "timeout_seconds"),
        ({"timeout_seconds": "inf"}, "timeout_seconds"),
        ({"price_per_million_input": "-0.5"}, "price_per_million_input"),
        ({"kind": "shell"}, "kind"),
    ],
)
def test_a_bad_backbone_is_refused_with_a_message_by_its_field(world, changes, field):
    client = client_for(world, "admin")
    before = model_counts()
    response = client.post(reverse("oracle:backbone_new"), {**BACKBONE_OK, **changes})
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors.get(field), form.errors
    assert model_counts() == before
    edit = client.post(
        reverse("oracle:backbone_edit", args=[world["ids"]["backbone_id"]]),
        {**BACKBONE_OK, **changes},
    )
    assert edit.status_code == 200
    assert edit.context["form"].errors
    assert model_counts() == before


def test_a_good_backbone_is_saved(world):
    client = client_for(world, "admin")
    response = client.post(reverse("oracle:backbone_new"), BACKBONE_OK)
    assert response.status_code == 302


@pytest.mark.parametrize(
    "form",
    [
        {"name": "c", "annotators_per_window": "abc"},
        {"name": "c", "annotators_per_window": "-1"},
        {"name": "c", "annotators_per_window": "99999999999999999999"},
        {"name": "c", "annotators_per_window": "2", "physicians": ["abc"]},
        {
            "name": "c",
            "annotators_per_window": "2",
            "physicians": ["99999999999999999999"],
        },
        {"name": "c", "annotators_per_window": "2", "cohort": "-3"},
        {"name": "c", "annotators_per_window": "2", "cohort": "99999999999999999999"},
        {"name": "", "annotators_per_window": "1"},
        {"name": "x" * 500, "annotators_per_window": "1"},
    ],
)
def test_a_bad_campaign_form_is_refused_with_a_message(world, form):
    client = client_for(world, "admin")
    before = model_counts()
    response = client.post(reverse("annotation:campaign_new"), form)
    assert response.status_code == 200
    assert response.context["form"].errors
    assert model_counts() == before


@pytest.mark.parametrize(
    "route, form",
    [
        (
            "annotation:campaign_new",
            {"name": "nul\x00byte", "annotators_per_window": "1"},
        ),
        ("annotation:calibration_draw", {"name": "s\x00", "per_stratum": "5"}),
        ("windows:import_start", {"source": "mimic\x00", "path": "/x"}),
        ("exports:release_build_start", {"kind": "gold", "notes": "\x00"}),
    ],
)
def test_a_nul_byte_in_any_form_field_is_a_400_and_writes_nothing(world, route, form):
    """PostgreSQL refuses NUL in text: refused before any view runs
    (realicu_web.middleware.RequestHygieneMiddleware), on every form."""
    client = client_for(world, "admin")
    before = model_counts()
    response, error = call(client, "post", reverse(route), form)
    assert error is None, error
    assert response.status_code == 400
    assert b"NUL character" in response.content
    assert model_counts() == before


def test_a_campaign_cannot_take_a_researcher_as_physician(world):
    client = client_for(world, "admin")
    before = model_counts()
    researcher = world["users"]["researcher"]
    response = client.post(
        reverse("annotation:campaign_new"),
        {"name": "c", "annotators_per_window": "1", "physicians": [researcher.pk]},
    )
    assert response.status_code == 200
    assert response.context["form"].errors
    assert model_counts() == before


@pytest.mark.parametrize(
    "form",
    [
        {"name": "s", "per_stratum": "abc", "band": "0.05"},
        {"name": "s", "per_stratum": "-1", "band": "0.05"},
        {"name": "s", "per_stratum": "10", "band": "nan"},
        {"name": "s", "per_stratum": "10", "band": "inf"},
        {"name": "s", "per_stratum": "10", "band": "-1"},
        {"name": "s", "per_stratum": "99999999999999999999", "band": "0.05"},
        {"name": "", "per_stratum": "10", "band": "0.05"},
        {"name": "s", "per_stratum": "10", "band": "0.05", "campaigns": ["abc"]},
        {
            "name": "s",
            "per_stratum": "10",
            "band": "0.05",
            "seed": "99999999999999999999",
        },
    ],
)
def test_a_bad_calibration_draw_is_refused_with_a_message(world, form):
    client = client_for(world, "admin")
    data = {"campaigns": [world["ids"]["campaign_id"]], **form}
    before = model_counts()
    response, error = call(client, "post", reverse("annotation:calibration_draw"), data)
    assert error is None, error
    assert response.status_code == 302
    assert model_counts() == before


@pytest.mark.parametrize(
    "form",
    [
        {"pair": "abc", "judgment": "same"},
        {"pair": "99999999999999999999", "judgment": "same"},
        {"pair": "-1", "judgment": "different"},
        {"judgment": "same"},
        {"pair": "PAIR", "judgment": "maybe"},
    ],
)
def test_a_bad_calibration_judgment_is_refused(world, form):
    client = client_for(world, "admin")
    pair = CalibrationPair.objects.get()
    data = {k: (str(pair.pk) if v == "PAIR" else v) for k, v in form.items()}
    before = model_counts()
    response, error = call(
        client,
        "post",
        reverse("annotation:calibration_judge_post", args=[world["ids"]["set_id"]]),
        data,
    )
    assert error is None, error
    assert response.status_code in (200, 302)
    assert model_counts() == before


@pytest.mark.parametrize("tau", ["", "abc", "nan", "inf", "-1", "2", "1e400"])
def test_a_bad_tau_is_not_adopted(world, tau):
    client = client_for(world, "admin")
    before = model_counts()
    response, error = call(
        client,
        "post",
        reverse("annotation:calibration_adopt", args=[world["ids"]["set_id"]]),
        {"tau": tau, "reason": "r"},
    )
    assert error is None, error
    assert response.status_code == 302
    assert model_counts() == before


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\x01\x02\xff\xfe" * 100,
        b"\xef\xbb\xbf{not json}\n",
        b"[1,2,3]\n",
        b"{}\n",
    ],
)
def test_a_bad_prediction_file_is_refused_with_a_message(world, content):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_for(world, "researcher")
    before = model_counts()
    response = client.post(
        reverse("exports:submission_upload", args=[world["ids"]["release_id"]]),
        {
            "file": SimpleUploadedFile("p.jsonl", content),
            "model_name": "m",
            "k": "5",
        },
    )
    assert response.status_code == 400
    assert model_counts() == before


def test_a_prediction_file_over_the_limit_is_refused(world, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.REALICU_SUBMISSION_MAX_BYTES = 1000
    client = client_for(world, "researcher")
    before = model_counts()
    response = client.post(
        reverse("exports:submission_upload", args=[world["ids"]["release_id"]]),
        {
            "file": SimpleUploadedFile("p.jsonl", b'{"a": 1}\n' * 500),
            "model_name": "m",
            "k": "5",
        },
    )
    assert response.status_code == 400
    assert b"REALICU_SUBMISSION_MAX_BYTES" in response.content
    assert model_counts() == before


@pytest.mark.parametrize(
    "path",
    [
        "/etc",
        "ROOT/../..",
        "ROOT/../outside",
        "ROOT/\x00x",
        "relative/dir",
        "ROOT/missing",
    ],
)
def test_an_import_outside_the_import_roots_is_refused(world, settings, tmp_path, path):
    root = tmp_path / "imports"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    settings.REALICU_IMPORT_ROOTS = [str(root)]
    client = client_for(world, "admin")
    before = model_counts()
    response, error = call(
        client,
        "post",
        reverse("windows:import_start"),
        {"source": "mimic", "path": path.replace("ROOT", str(root))},
    )
    assert error is None, error
    assert response.status_code == 400
    if "\x00" in path:  # refused before the view (RequestHygieneMiddleware)
        assert b"NUL character" in response.content
    else:
        assert response.context["form"].errors
    assert model_counts() == before
