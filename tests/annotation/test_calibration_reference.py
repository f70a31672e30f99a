"""The reference calibration on the calibration pages: the sweep of the shipped
clinical pairs (from tau 0.1, with the share of unrelated pairs each tau
matches), the adopted tau with its F1, precision and recall, and the tau in
force with where it comes from; computed once per process; admins only."""

import pytest
from django.urls import reverse
from django.utils.html import escape

from accounts.roles import Role
from evaluation import matcher as matcher_module
from evaluation import reference_calibration
from evaluation.matcher import MatcherUnavailable, configured_model_name
from evaluation.models import EmbeddingCache, MatcherModel
from evaluation.reference_calibration import (
    reference_pairs_embed,
    reference_report_for,
)

from .conftest import make_role_user

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def report(db):
    return reference_report_for()


def test_reference_page_shows_the_sweep_and_the_adopted_tau(client, admin_user, report):
    client.force_login(admin_user)

    html = client.get(reverse("annotation:calibration_reference")).content.decode()

    adopted = report["adopted"]
    assert configured_model_name() in html
    assert f'data-adopted-tau="{adopted["tau"]}"' in html
    assert f"<strong data-adopted-f1>{adopted['f1']:.3f}</strong>" in html
    assert f"<span data-adopted-precision>{adopted['precision']:.3f}</span>" in html
    assert f"<span data-adopted-recall>{adopted['recall']:.3f}</span>" in html
    # Every swept tau has its row, from 0.1, with the unrelated-match rates.
    assert [r["tau"] for r in report["rows"]][0] == 0.1
    for row in report["rows"]:
        assert f'<tr data-tau="{row["tau"]}"' in html
    assert html.count("data-unrelated>") == 3 * len(report["rows"])
    rate = adopted["unrelated_match_rate"]["problem"]
    assert f"{100 * rate:.1f} %" in html
    assert html.count("data-adopted>adopted</span>") == 1
    # The tau in force and where it comes from.
    assert f'data-tau-in-force="{report["tau_in_force"]}"' in html
    assert escape(report["tau_source"]) in html
    assert html.count("data-in-force>") == 1


def test_reference_report_is_not_recomputed_per_request(
    client, admin_user, report, django_assert_max_num_queries
):
    client.force_login(admin_user)
    url = reverse("annotation:calibration_reference")
    client.get(url)

    # Embedding the 251 pairs again would read the embedding cache (or the
    # model); a request reads only the session, the user and the tau in force.
    with django_assert_max_num_queries(6):
        response = client.get(url)
    assert response.status_code == 200


def test_the_list_page_loads_the_reference_report_for_admins(
    client, admin_user, report
):
    client.force_login(admin_user)
    url = reverse("annotation:calibration_reference")

    page = client.get(reverse("annotation:calibration_list")).content.decode()
    assert f'hx-get="{url}" hx-trigger="load"' in page
    assert f'data-tau-in-force="{report["tau_in_force"]}"' in page
    assert escape(report["tau_source"]) in page

    partial = client.get(url, **HTMX).content.decode()
    assert partial.lstrip().startswith('<section id="reference-calibration"')
    assert "<html" not in partial


def test_a_tau_adopted_by_an_admin_is_shown_in_force_beside_the_reference(
    client, admin_user, report
):
    MatcherModel.objects.create(
        name=configured_model_name(), tau=0.6, notes="judged by the ICU team"
    )
    client.force_login(admin_user)

    html = client.get(reverse("annotation:calibration_reference")).content.decode()

    assert 'data-tau-in-force="0.6"' in html
    assert "judged by the ICU team" in html
    assert f'data-adopted-tau="{report["adopted"]["tau"]}"' in html
    assert '<tr data-tau="0.6"' in html and "data-in-force>" in html


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_reference_page_is_403_for_non_admins(client, db, role):
    user = make_role_user(role)
    client.force_login(user)

    assert client.get(reverse("annotation:calibration_reference")).status_code == 403
    if role == Role.PHYSICIAN:
        # Judges see the tau in force, not the reference sweep.
        page = client.get(reverse("annotation:calibration_list")).content.decode()
        assert "data-tau-in-force" in page
        assert "calibration/reference" not in page


def test_an_unknown_model_is_404(client, admin_user):
    client.force_login(admin_user)
    url = reverse("annotation:calibration_reference")

    assert client.get(url, {"model": "../etc/passwd"}).status_code == 404


def test_the_web_reads_the_report_from_a_workers_embeddings_and_loads_no_model(
    db, monkeypatch
):
    """Issue 35: the page computes the report from the cached embeddings
    only; before a worker embedded the pairs it says so, and loads nothing."""
    monkeypatch.setattr(reference_calibration, "_reports", {})
    name = configured_model_name()
    EmbeddingCache.objects.filter(model_name=name).delete()

    def no_model(model_name):
        raise AssertionError("a web process loads no model")

    with monkeypatch.context() as web:
        web.setattr(matcher_module, "load_model", no_model)
        with pytest.raises(MatcherUnavailable, match="not embedded with"):
            reference_report_for(embedded_only=True)
    assert not EmbeddingCache.objects.filter(model_name=name).exists()

    # A worker, with the model, embeds them as it starts.
    assert reference_pairs_embed() == f"reference pairs embedded with {name}"
    worker = reference_calibration._reports.copy()
    monkeypatch.setattr(reference_calibration, "_reports", {})
    monkeypatch.setattr(matcher_module, "load_model", no_model)

    report = reference_report_for(embedded_only=True)

    (computed,) = worker.values()
    assert [(r["tau"], str(r["f1"])) for r in report["rows"]] == [
        (r["tau"], str(r["f1"])) for r in computed["rows"]
    ]
    assert report["adopted"]["tau"] == computed["adopted"]["tau"]
