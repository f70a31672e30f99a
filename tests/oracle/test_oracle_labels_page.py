"""The admin's page of an Oracle run's labels: the run's labelled windows a page
at a time (all, labelled, failed), and each label beside its window's
trajectory with every cited event named. Physicians and researchers get the
policy's 403 (they never reach Oracle labels), a label of another run is a 404,
and bad paging input falls back to the first page."""

import pytest
from django.urls import reverse

from accounts.roles import Role
from oracle import selectors_labels, services
from oracle.models import OracleLabel
from tests.annotation.conftest import make_role_user
from tests.factories import make_event, make_stay
from tests.oracle.helpers import make_cohort_with_stay, rules_run
from windows.models import Domain, Event, EventKind

pytestmark = pytest.mark.django_db


def _rules_run(admin, name="labels run"):
    cohort, stay, windows = make_cohort_with_stay()
    run = rules_run(admin, name=name, cohort=cohort)
    services.oracle_run_execute_inline(run_id=run.pk)
    return run, stay, windows


@pytest.fixture
def labelled(admin_user):
    """A rules run over a 12-h stay; the label of window 3 (hours 6 to 6.5) rewritten with
    known items citing the stay's creatinine results and its norepinephrine
    start, and one citing an event of another stay; window 4's label failed."""
    run, stay, windows = _rules_run(admin_user)
    creatinine = list(
        Event.objects.filter(admission=stay.admission, category="creatinine").order_by(
            "time"
        )
    )
    drip = Event.objects.get(admission=stay.admission, category="norepinephrine")
    elsewhere = make_event(
        admission=make_stay(hours=4).admission,
        time=stay.intime,
        domain=Domain.LABS,
        category="potassium",
        name="Potassium secret",
        value_num=6.1,
        unit="mmol/L",
    )
    label = OracleLabel.objects.get(run=run, window=windows[3])
    label.status = "deteriorating"
    label.payload = {
        "status_evidence": [creatinine[2].pk],
        "acute_problems": [
            {"text": "Acute kidney injury", "evidence": [c.pk for c in creatinine]}
        ],
        "action_ratings": [
            {"event_id": drip.pk, "rating": "acceptable", "evidence": [drip.pk]}
        ],
        "added_actions": [{"text": "Fluid challenge", "evidence": []}],
        "red_flags": [
            {"text": "Rising creatinine", "evidence": [creatinine[2].pk, elsewhere.pk]}
        ],
    }
    label.save()
    failed = OracleLabel.objects.get(run=run, window=windows[4])
    failed.state = "failed"
    failed.status = ""
    failed.payload = {}
    failed.error = "The reply was not JSON: 'I think the patient'"
    failed.save()
    return {"run": run, "label": label, "failed": failed, "windows": windows}


def test_the_list_pages_the_runs_windows_and_filters_them(
    client, admin_user, labelled, monkeypatch
):
    monkeypatch.setattr(selectors_labels, "LABELS_PER_PAGE", 2)
    run = labelled["run"]
    total = run.labels.count()
    client.force_login(admin_user)
    url = reverse("oracle:run_labels", args=[run.pk])

    first = client.get(url).content.decode()
    assert first.count("data-label-id=") == 2
    assert f"of {total} windows" in first and "data-page-next" in first
    second = client.get(url, {"page": 2}).content.decode()
    assert f'data-label-id="{labelled["label"].pk}"' in second
    assert "Deteriorating" in second
    # Bad page numbers fall back to the first page rather than failing.
    for page in ("abc", "-3", "9" * 40):
        assert client.get(url, {"page": page}).status_code == 200

    failed = client.get(url, {"state": "failed"}).content.decode()
    assert failed.count("data-label-id=") == 1
    assert f'data-label-id="{labelled["failed"].pk}"' in failed
    assert "not JSON" in failed
    ok = client.get(url, {"state": "ok"}).content.decode()
    assert ok.count("data-label-id=") == 2 and "not JSON" not in ok
    assert f"{total - 1} windows" in ok
    # An unknown filter shows every window.
    assert f"{total} windows" in client.get(url, {"state": "x"}).content.decode()

    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="oracle-labels"' in fragment and "<html" not in fragment


def test_the_list_reads_a_page_in_a_bounded_number_of_queries(
    client, admin_user, labelled, django_assert_max_num_queries
):
    client.force_login(admin_user)
    url = reverse("oracle:run_labels", args=[labelled["run"].pk])
    with django_assert_max_num_queries(10):
        response = client.get(url)
    count = labelled["run"].labels.count()
    assert response.content.decode().count("data-label-id=") == count


def test_a_label_shows_beside_the_trajectory_with_its_evidence_named(
    client, admin_user, labelled
):
    run, label = labelled["run"], labelled["label"]
    client.force_login(admin_user)
    page = client.get(reverse("oracle:run_label", args=[run.pk, label.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    # The window page's trajectory partials: the overview and the plots.
    assert "data-trajectory" in html and "data-plots" in html
    assert f"/stays/{label.window.stay_id}/tracks.json?window=3" in html
    assert "data-status>Deteriorating<" in html
    for text in ("Acute kidney injury", "Fluid challenge", "Rising creatinine"):
        assert text in html
    # Each cited event named with its value and hour since admission.
    assert "2.4 mg/dL" in html and "6.0 h" in html and "1.6 mg/dL" in html
    assert 'data-rating="acceptable">Acceptable<' in html
    assert "0.1 mcg/kg/min" in html
    # An id outside the window's admission is shown as such, never named.
    assert "(not in this stay)" in html and "Potassium secret" not in html
    assert "No evidence cited." in html  # the added action cites nothing
    # Previous and next labels of the run, and the way back to the list.
    assert "data-shortcut-prev" in html and "data-shortcut-next" in html
    assert f"4 / {run.labels.count()}" in html

    failed = client.get(
        reverse("oracle:run_label", args=[run.pk, labelled["failed"].pk])
    ).content.decode()
    assert "data-label-error" in failed and "not JSON" in failed


def test_within_a_filter_next_and_previous_stay_in_it(client, admin_user, labelled):
    run, failed = labelled["run"], labelled["failed"]
    client.force_login(admin_user)
    html = client.get(
        reverse("oracle:run_label", args=[run.pk, failed.pk]), {"state": "failed"}
    ).content.decode()
    assert "1 / 1" in html and "data-shortcut-next" not in html


def test_a_label_of_another_run_or_a_forged_id_is_a_404(client, admin_user, labelled):
    other, _, _ = _rules_run(admin_user, name="other")
    client.force_login(admin_user)
    foreign = other.labels.first()
    url = reverse("oracle:run_label", args=[labelled["run"].pk, foreign.pk])
    assert client.get(url).status_code == 404
    url = reverse("oracle:run_label", args=[labelled["run"].pk, 10**12])
    assert client.get(url).status_code == 404


@pytest.mark.parametrize("role", [Role.PHYSICIAN, Role.RESEARCHER])
def test_physicians_and_researchers_never_reach_oracle_labels(client, labelled, role):
    run, label = labelled["run"], labelled["label"]
    client.force_login(make_role_user(role))
    for url in (
        reverse("oracle:run_labels", args=[run.pk]),
        reverse("oracle:run_label", args=[run.pk, label.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 403
        body = response.content.decode()
        assert "admins (adjudicators) only" in body
        assert "Acute kidney injury" not in body and "Deteriorating" not in body


def test_the_run_page_links_to_its_labels(client, admin_user, labelled):
    run = labelled["run"]
    client.force_login(admin_user)
    html = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    assert f'href="{reverse("oracle:run_labels", args=[run.pk])}"' in html


def test_an_action_rating_of_an_event_named_as_the_window_page_names_it(
    admin_user, labelled
):
    shown = selectors_labels.oracle_label_shown(
        admin=admin_user, label=labelled["label"]
    )
    (rating,) = shown["action_ratings"]
    assert rating.action.found and rating.action.kind == EventKind.ACTION
    assert rating.action.value == "0.1 mcg/kg/min"
    assert [e.value for e in shown["acute_problems"][0].evidence] == [
        "1 mg/dL",
        "1.6 mg/dL",
        "2.4 mg/dL",
    ]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_admin_reads_the_labels_beside_the_plots_with_the_keyboard(
    live_server, admin_user, labelled
):
    """From the run page to the list, j and Enter open a label; the label sits
    beside the drawn plots at 1440 px; ] moves to the next label."""
    from tests.browser import chromium, sign_in

    run, label = labelled["run"], labelled["label"]
    with chromium() as browser:
        errors = []
        page = sign_in(browser, live_server, admin_user, errors=errors)
        page.goto(f"{live_server.url}{reverse('oracle:run_detail', args=[run.pk])}")
        page.click("[data-labels-link]")
        page.wait_for_selector("table.oracle-labels")
        page.screenshot(path="/tmp/oracle_labels_list.png")
        for _ in range(4):  # the fourth window: the rewritten label
            page.keyboard.press("j")
        page.keyboard.press("Enter")
        page.wait_for_url(f"**/labels/{label.pk}/")
        page.wait_for_selector("[data-trajectory][data-ready=true]")
        assert page.locator("[data-plots] canvas").count() > 0
        aside = page.locator(".oracle-label").bounding_box()
        plots = page.locator("[data-plots]").bounding_box()
        assert aside["x"] >= plots["x"] + plots["width"]  # beside, not below
        assert aside["y"] < plots["y"] + plots["height"]
        text = page.inner_text(".oracle-label")
        assert "Acute kidney injury" in text and "2.4 mg/dL" in text
        page.screenshot(path="/tmp/oracle_label_page.png", full_page=False)
        page.keyboard.press("]")
        page.wait_for_url(f"**/labels/{labelled['failed'].pk}/")
        assert "not JSON" in page.inner_text(".oracle-label")
        assert errors == []
