"""The admins' Gold budget page of a Scale submission (issue 33): for a figure
and a target width, the interval now (the one the score page and the API
show) and the physician windows a uniform and an active draw would need."""

from __future__ import annotations

import math

import pytest
from rest_framework.test import APIClient

from evaluation.ppi_budget import active_factor, gold_budget, level_factor
from exports.services import token_create

from .helpers import scored_submission

pytestmark = pytest.mark.django_db

FIGURE = "status_macro_f1"


@pytest.fixture
def scored(researcher, rectified_release, tiny_stays):
    submission = scored_submission(researcher, rectified_release, tiny_stays["windows"])
    submission.public = True
    submission.save(update_fields=["public"])
    return submission


def _url(submission, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/releases/submissions/{submission.pk}/budget/?{query}"


def _cell(page: str, attribute: str) -> str:
    return page.split(f'{attribute}="')[1].split('"')[0]


def test_the_admin_sees_the_interval_now_and_the_windows_needed(
    client, admin_user, researcher, scored
):
    stored = scored.scores["intervals"]["figures"][FIGURE]
    width_now = stored["upper"] - stored["lower"]
    assert math.isfinite(width_now)
    client.force_login(admin_user)
    page = client.get(_url(scored, figure=FIGURE, width=width_now / 2))
    assert page.status_code == 200
    html = page.content.decode()
    # The width now is the score page's and the API's interval.
    assert float(_cell(html, "data-width-now")) == pytest.approx(width_now)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=researcher).key}")
    served = api.get(f"/api/v1/submissions/{scored.pk}/").json()["scores"]
    figure = served["intervals"]["figures"][FIGURE]
    assert float(_cell(html, "data-width-now")) == pytest.approx(
        figure["upper"] - figure["lower"]
    )
    # Half the width takes four times the Gold term's windows.
    expected = gold_budget(stored, target_width=width_now / 2)
    assert int(_cell(html, "data-more-uniform")) == expected["more_uniform"]
    assert expected["more_uniform"] >= 3 * stored["n_gold"] - 1
    # The active figure is not hidden: the page says why it is missing.
    assert "Not computed: no stored Oracle uncertainty" in html
    assert 'data-more-active=""' in html
    assert "a plan, not a promise" in html


def _store_draw(campaign, rows: dict, *, floor: float) -> None:
    """An active draw's rows: window -> (uncertainty, level, probability)."""
    from oracle.models import GoldInclusion

    GoldInclusion.objects.bulk_create(
        GoldInclusion(
            campaign=campaign,
            window=window,
            uncertainty=u,
            level=level,
            probability=p,
            floor=floor,
            source="t",
        )
        for window, (u, level, p) in rows.items()
    )


@pytest.fixture
def plan_half_width(client, admin_user, scored, rectified_release):
    """``plan(rows, floor=...)``: an active draw's rows stored on the release's
    campaign (see _store_draw), then the page planning half the stored width:
    (its html, the figure's stored interval, the target width)."""

    def plan(rows: dict, *, floor: float):
        _store_draw(rectified_release.validation_report.campaign, rows, floor=floor)
        stored = scored.scores["intervals"]["figures"][FIGURE]
        target = (stored["upper"] - stored["lower"]) / 2
        client.force_login(admin_user)
        html = client.get(_url(scored, figure=FIGURE, width=target)).content.decode()
        return html, stored, target

    return plan


def test_the_active_figure_reads_the_stored_uncertainty(plan_half_width, tiny_stays):
    w = tiny_stays["windows"]
    html, stored, target = plan_half_width(
        {
            w["A"][0]: (0.9, None, 0.5),
            w["A"][1]: (0.0, None, 0.5),
            w["B"][0]: (0.0, None, 0.5),
        },
        floor=0.7,
    )
    # A draw without levels: the plan reads the raw uncertainty.
    factor = active_factor([0.9, 0.0, 0.0], [2.0, 2.0, 2.0], floor=0.7)
    assert factor < 1
    # The scores counted the Gold windows as a uniform draw (stored before
    # the draw's rows), so they count at their uniform worth.
    expected = gold_budget(stored, target_width=target, active=factor)
    assert int(_cell(html, "data-more-active")) == expected["more_active"]
    assert expected["more_active"] < expected["more_uniform"]


def test_the_active_figure_reads_the_stored_levels_and_floor(
    plan_half_width, tiny_stays
):
    w = tiny_stays["windows"]
    levels = {w["A"][0]: 2, w["A"][1]: 0, w["B"][0]: 0}
    html, stored, target = plan_half_width(
        {window: (level / 3, level, 0.5) for window, level in levels.items()},
        floor=0.35,
    )
    assert float(_cell(html, "data-floor")) == 0.35
    # Each level's error is the Oracle's distance from the consensus on the
    # Gold windows (a0 0.875 on level 2; a1 0 and b0 0.5 on level 0, the
    # disagreements the page lists), planned with the stored floor, not 0.7.
    ids = sorted(levels, key=lambda x: x.pk)
    distances = {w["A"][0]: 0.875, w["A"][1]: 0.0, w["B"][0]: 0.5}
    args = ([levels[x] for x in ids], [distances[x] for x in ids], [2.0] * 3)
    factor = level_factor(*args, floor=0.35)
    assert factor != pytest.approx(level_factor(*args, floor=0.7))
    expected = gold_budget(stored, target_width=target, active=factor)
    assert int(_cell(html, "data-more-active")) == expected["more_active"]


def test_uncertainty_stored_for_some_gold_windows_only_is_said_plainly(
    plan_half_width, tiny_stays
):
    w = tiny_stays["windows"]
    html, stored, target = plan_half_width(
        {w["A"][0]: (0.9, None, 0.5)},
        floor=0.7,
    )
    assert "stored for 1 of the 3 physician windows only" in html
    assert 'data-more-active=""' in html
    # The uniform figure is there all the same.
    expected = gold_budget(stored, target_width=target)
    assert int(_cell(html, "data-more-uniform")) == expected["more_uniform"]


@pytest.mark.parametrize(
    "width",
    ["abc", "0", "1", "0.9999999999999999999", "-0.2", "nan", "inf", "1e400", ""],
)
def test_a_bad_width_is_a_message_not_an_error(client, admin_user, scored, width):
    client.force_login(admin_user)
    page = client.get(_url(scored, figure=FIGURE, width=width))
    assert page.status_code == 200
    html = page.content.decode()
    assert "data-width-now" not in html
    assert "errorlist" in html


def test_a_forged_figure_is_a_message(client, admin_user, scored):
    client.force_login(admin_user)
    page = client.get(_url(scored, figure="oracle_secret", width="0.1"))
    assert page.status_code == 200
    assert "data-width-now" not in page.content.decode()
    assert "Select a valid choice" in page.content.decode()


def test_other_roles_are_refused(client, physician, researcher, scored):
    for user in (physician, researcher):
        client.force_login(user)
        assert client.get(_url(scored, figure=FIGURE, width="0.1")).status_code == 403


def test_a_submission_the_admin_may_not_see_is_a_404(client, admin_user, scored):
    scored.public = False
    scored.save(update_fields=["public"])
    client.force_login(admin_user)
    assert client.get(_url(scored, figure=FIGURE, width="0.1")).status_code == 404


def test_the_score_page_links_admins_to_the_budget(client, admin_user, scored):
    client.force_login(admin_user)
    page = client.get(f"/releases/submissions/{scored.pk}/").content.decode()
    assert f"/releases/submissions/{scored.pk}/budget/" in page


def test_the_windows_where_physicians_and_oracle_disagree_most_come_first(
    client, admin_user, scored, tiny_stays
):
    w = tiny_stays["windows"]
    client.force_login(admin_user)
    html = client.get(_url(scored)).content.decode()
    table = html.split("data-disagreements>")[1].split("</table>")[0]
    order = [int(part.split('"')[0]) for part in table.split('data-window-id="')[1:]]
    # a0: status (1), problems {Septic shock, AKI} against {AKI} (1/2), its
    # actions and red flag against none (1, 1): 0.875; b0: the same status
    # and problem, its action and red flag against none: 0.5; a1 agrees: 0.
    assert order == [w["A"][0].pk, w["B"][0].pk, w["A"][1].pk]
    values = [float(v.split('"')[0]) for v in table.split('data-disagreement="')[1:]]
    assert values == pytest.approx([0.875, 0.5, 0.0])
    campaign = scored.release.validation_report.campaign_id
    assert f'href="/annotate/campaigns/{campaign}/#window-{w["A"][0].pk}"' in table
