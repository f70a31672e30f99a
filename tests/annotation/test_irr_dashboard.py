"""The campaign's IRR dashboard: status statistics with CIs, mean pairwise F1
of the set tasks, per-pair figures, the keep-rate table, the per-physician
table and the uPlot charts' data; the recompute button's progress; 404 for non-admins."""

import json

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from accounts.roles import Role
from annotation.models import AgreementRecompute, RecomputeState
from annotation.selectors.irr import campaign_irr
from evaluation.matcher import SemanticMatcher, tau_source_of
from evaluation.models import MatcherModel

from .conftest import make_role_user
from .consensus_data import stay  # noqa: F401 - stay, a fixture


@pytest.fixture
def dashboard(client, admin_user, labelled):
    client.force_login(admin_user)
    return client.get(reverse("annotation:irr_dashboard", args=[labelled.pk]))


def test_dashboard_shows_the_campaigns_irr_figures(dashboard, labelled):
    html = dashboard.content.decode()
    irr = campaign_irr(campaign=labelled)

    assert dashboard.status_code == 200
    status = irr["status"]
    assert f"{status['percent_agreement']['estimate']:.3f}" in html  # 0.750
    assert "Cohen's kappa (2 raters)" in html
    assert f"{status['kappa']['estimate']:.3f}" in html  # 7/11
    assert f"{status['alpha_ordinal']['estimate']:.3f}" in html
    for task, figures in irr["set_tasks"].items():
        assert f'data-task="{task}"' in html
        assert f"{figures['mean_pairwise_f1']['estimate']:.3f}" in html
    assert html.count('<figure class="chart" data-chart=') == 3


def test_dashboard_says_which_tau_matches_and_where_it_comes_from(
    client, admin_user, labelled, matcher
):
    client.force_login(admin_user)
    url = reverse("annotation:irr_dashboard", args=[labelled.pk])
    in_force = SemanticMatcher(matcher.model_name)

    html = client.get(url).content.decode()
    assert f'data-tau-in-force="{in_force.tau}"' in html
    assert escape(in_force.tau_source) in html
    # The agreements were computed at 0.5: the tau in force, so its source.
    assert 'data-computed-tau="0.5"' in html
    assert escape(tau_source_of(matcher.model_name, 0.5)) in html

    # An admin adopts another tau: the page says the agreements' tau is no
    # longer the model's, and which one is.
    MatcherModel.objects.create(
        name=matcher.model_name, tau=0.6, notes="judged by the ICU team"
    )
    html = client.get(url).content.decode()
    assert 'data-tau-in-force="0.6"' in html
    assert "judged by the ICU team" in html
    assert f"recorded as 0.5; {matcher.model_name}&#x27;s tau is now 0.6" in html


def test_keep_rate_table_has_raw_and_kept_counts_per_task(dashboard, labelled):
    html = dashboard.content.decode()
    keep = campaign_irr(campaign=labelled)["keep_rates"]

    for task in ("status", "acute_problems", "recommended_actions", "red_flags"):
        row = html.split(f'<tr data-task="{task}">')[-1].split("</tr>")[0]
        assert f"data-raw>{keep[task]['raw']}<" in row
        assert f"data-kept>{keep[task]['kept_auto']}<" in row


def test_pair_and_physician_tables(dashboard, physicians):
    html = dashboard.content.decode()
    a, b = sorted(p.username for p in physicians)
    assert f"{a} &amp; {b}" in html or f"{b} &amp; {a}" in html
    for physician in physicians:
        row = html.split(f'<tr data-physician="{physician.username}"')[1].split(
            "</tr>"
        )[0]
        assert "data-labels-done>4 of 4<" in row
    assert "Recompute agreement for every window" in html


def test_progress_bar_polls_while_a_recompute_runs(client, admin_user, labelled):
    """The partial reads the job row: state, percent, label, heartbeat age;
    a recompute with a live heartbeat is not started twice."""
    client.force_login(admin_user)
    job = AgreementRecompute.objects.create(
        campaign=labelled,
        created_by=admin_user,
        state=RecomputeState.RUNNING,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        lease="x" * 32,
        worker="host:123",
        attempts=1,
        progress_done=2,
        progress_total=4,
        progress_label="2 of 4 windows",
    )
    url = reverse("annotation:campaign_recompute_progress", args=[labelled.pk])

    html = client.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert 'data-recompute-state="running"' in html
    assert 'hx-trigger="every 1s"' in html
    assert 'value="50"' in html and "2 of 4 windows" in html
    assert "last heartbeat 0 s ago from host:123" in html
    response = client.post(
        reverse("annotation:campaign_recompute", args=[labelled.pk]),
        HTTP_HX_REQUEST="true",
    )
    refused = response.content.decode()
    assert "A recompute of this campaign is already running" in refused
    assert "2 of 4 windows" in refused
    assert AgreementRecompute.objects.count() == 1
    AgreementRecompute.objects.filter(pk=job.pk).update(
        state=RecomputeState.DONE,
        lease="",
        computed=4,
        skipped=0,
        progress_done=4,
        progress_label="done: 4 windows recomputed, 0 still waiting for labels",
    )
    done = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-recompute-state="done"' in done and "hx-trigger" not in done
    assert "4 windows recomputed, 0 still waiting for labels" in done


def test_failed_recompute_shows_its_error(client, admin_user, labelled):
    client.force_login(admin_user)
    AgreementRecompute.objects.create(
        campaign=labelled,
        created_by=admin_user,
        state=RecomputeState.FAILED,
        finished_at=timezone.now(),
        error="The matcher model <x> is not installed.",
        progress_label="failed: the matcher is unavailable",
    )
    html = client.get(
        reverse("annotation:campaign_recompute_progress", args=[labelled.pk]),
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'data-recompute-state="failed"' in html
    assert "The matcher model &lt;x&gt; is not installed." in html
    assert "data-recompute-all" in html


def test_dashboard_without_agreement_says_so(client, admin_user, gold):
    client.force_login(admin_user)
    html = client.get(
        reverse("annotation:irr_dashboard", args=[gold.pk])
    ).content.decode()
    assert "No window has its agreement computed yet" in html


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_dashboard_is_403_for_non_admins(client, labelled, role):
    client.force_login(make_role_user(role))
    assert (
        client.get(reverse("annotation:irr_dashboard", args=[labelled.pk])).status_code
        == 403
    )


def test_charts_carry_the_estimates_with_their_cis_and_undefined_as_null(dashboard):
    charts = {
        name: json.loads(
            dashboard.content.decode()
            .split(f'id="{name}-chart"')[1]
            .split(">", 1)[1]
            .split("</script>")[0]
        )
        for name in ("status", "f1", "keep")
    }
    status = dashboard.context["status"]
    first = charts["status"]["bars"][0]
    assert charts["status"]["kind"] == "bars"
    assert first["label"] == "Percent agreement"
    for key in ("estimate", "low", "high"):
        assert first[key] == pytest.approx(status["percent_agreement"][key])
    # A keep rate has no CI: its whisker ends are null, not nan (invalid JSON).
    assert {bar["low"] for bar in charts["keep"]["bars"]} == {None}
    assert len(charts["f1"]["bars"]) == 3


def test_keep_rate_counts_are_those_of_the_rows_json(labelled):
    """On PostgreSQL the clusters and the consensus items are counted by the
    database (issue 35): the same figures as counting the rows' JSON."""
    from annotation.models import ConsensusLabel, WindowAgreement
    from annotation.selectors.irr import (
        _cluster_figures,
        _clusters_counted,
        _consensus_item_counts,
        _consensus_items_counted,
    )

    clusters = [a.clusters for a in WindowAgreement.objects.filter(campaign=labelled)]
    counted = _clusters_counted(clusters)
    assert counted["acute_problems"][0] > counted["acute_problems"][1] > 0
    assert _cluster_figures(labelled) == counted
    consensus = ConsensusLabel.objects.filter(campaign=labelled)
    items = _consensus_items_counted(c.items for c in consensus if not c.dropped)
    assert items["acute_problems"] > 0
    assert _consensus_item_counts(labelled) == items
