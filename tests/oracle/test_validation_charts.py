"""The validation page's charts: Table 1's F1 per task and the status macro-F1
per disease group go to the page as JSON for static/js/charts.js (uPlot), and
stay on the page as text."""

import json

import pytest
from django.urls import reverse

from oracle import services
from tests.oracle.helpers import oracle_label, rules_run

pytestmark = pytest.mark.django_db


def _chart(html: str, chart_id: str) -> dict:
    return json.loads(
        html.split(f'id="{chart_id}"')[1].split(">", 1)[1].split("</script>")[0]
    )


def test_validation_page_charts_table_1_and_the_disease_groups(
    client, admin_user, gold, clinical, matcher
):
    campaign, (w0, w1, _, _) = gold
    run = rules_run(admin_user, campaign)
    oracle_label(run, w0, "deteriorating", ["Septic shock"])
    oracle_label(run, w1, "stable", ["Septic shock"])
    report = services.validation_report_create(
        admin=admin_user, run=run, campaign=campaign, matcher=matcher
    ).report
    client.force_login(admin_user)

    html = client.get(reverse("oracle:run_validation", args=[run.pk])).content.decode()

    tasks = _chart(html, "task-f1-chart")
    assert tasks["kind"] == "bars"
    assert [bar["label"] for bar in tasks["bars"]] == [
        "Status macro-F1",
        "Acute problems F1",
        "Recommended actions F1",
        "Red flags F1",
    ]
    assert tasks["bars"][0]["estimate"] == pytest.approx(report["status_macro_f1"])
    assert f"Status macro-F1: {report['status_macro_f1']:.3f}" in html
    groups = _chart(html, "group-f1-chart")
    assert [bar["label"] for bar in groups["bars"]] == [
        g["label"] for g in report["by_disease_group"]
    ]
    assert "hbar" not in html and 'style="width' not in html
