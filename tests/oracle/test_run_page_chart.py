"""The run page's prompt-token histogram: the bins go to the page as JSON for
static/js/charts.js (uPlot), and the median, p95, maximum and every bin stay on
the page as text."""

import json

import pytest
from django.urls import reverse

from tests.browser import chromium, sign_in
from tests.oracle.helpers import llm_run


def _chart(html: str, chart_id: str) -> dict:
    source = html.split(f'id="{chart_id}"')[1].split(">", 1)[1]
    return json.loads(source.split("</script>")[0])


@pytest.mark.django_db
def test_the_run_page_charts_prompt_tokens_and_lists_every_bin(
    client, admin_user, fake_llm
):
    run, windows = llm_run(admin_user, fake_llm)
    client.force_login(admin_user)

    html = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()

    chart = _chart(html, "prompt-tokens-chart")
    assert chart["kind"] == "bars"
    n = len(windows)
    # Ten bins of 410 tokens from 0 to the context window; every prompt in the third.
    assert [bar["label"] for bar in chart["bars"]] == [
        f"{i * 410}–{(i + 1) * 410} ({n if i == 2 else 0})" for i in range(10)
    ]
    assert [bar["estimate"] for bar in chart["bars"]] == [
        1.0 if i == 2 else 0.0 for i in range(10)
    ]
    assert f"Median 1000 · p95 1000 · max 1000 of {n} windows" in html
    assert f'data-chart-value="820–1230 ({n})">820–1230 ({n}): 1.000' in html
    assert 'data-chart-value="0–410 (0)">0–410 (0): 0.000' in html
    assert "vendor/uPlot.iife.min.js" in html and "js/charts.js" in html
    assert "hbar" not in html and 'style="width' not in html


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_run_page_draws_the_prompt_token_histogram_with_uplot(
    live_server, admin_user, fake_llm
):
    run, windows = llm_run(admin_user, fake_llm)
    with chromium() as browser:
        errors = []
        page = sign_in(
            browser, live_server, admin_user, width=1280, height=900, errors=errors
        )

        page.goto(f"{live_server.url}{reverse('oracle:run_detail', args=[run.pk])}")
        figure = '[data-chart="prompt-tokens-chart"]'
        page.locator(f"{figure} [data-chart-canvas] canvas").wait_for()
        values = page.inner_text(f"{figure} .chart-values")
        assert f"820–1230 ({len(windows)}): 1.000" in values
        assert errors == []


WIDTHS = (1280, 1440, 1920)


def _boxes(page, selector: str) -> list[dict]:
    return page.eval_on_selector_all(
        selector,
        "nodes => nodes.map(n => { const b = n.getBoundingClientRect();"
        " return {text: n.textContent.trim(), left: b.left, top: b.top,"
        " right: b.right, bottom: b.bottom}; })",
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_run_page_keeps_each_figure_under_its_name_at_every_width(
    live_server, admin_user, fake_llm
):
    """At 1280, 1440 and 1920 px each figure of the progress card sits under
    its name (same column, next line), nothing runs past the card, and the
    histogram fits in it."""
    run, _ = llm_run(admin_user, fake_llm)
    with chromium() as browser:
        for width in WIDTHS:
            page = sign_in(browser, live_server, admin_user, width=width, height=900)
            page.goto(f"{live_server.url}{reverse('oracle:run_detail', args=[run.pk])}")
            page.locator("[data-chart-canvas] canvas").wait_for()
            names = _boxes(page, "#run-progress .facts dt")
            figures = _boxes(page, "#run-progress .facts dd")
            # The eight progress figures, and the request counters and the
            # estimate error (issue 32) while they have something to say.
            assert len(names) == len(figures) >= 8
            for name, figure in zip(names, figures):
                assert abs(name["left"] - figure["left"]) < 1, (width, name, figure)
                assert figure["top"] >= name["bottom"] - 1, (width, name, figure)
            card = _boxes(page, "#run-progress")[0]
            for part in _boxes(
                page, "#run-progress .facts dd, #run-progress .chart, .run-actions"
            ):
                assert part["right"] <= card["right"] + 1, (width, part)
            page.screenshot(path=f"/tmp/oracle_run_page_{width}.png", full_page=True)
            page.context.close()
