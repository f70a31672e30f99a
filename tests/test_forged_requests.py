"""Forged requests against every URL of the site, walked from the URL resolver:
each role (anonymous, physician, researcher, admin) with each method, ids of
objects made here, ids that belong to someone else or to another parent, and
ids that are zero, huge or not numbers. Nothing may answer 500, a role that
may not use an admin page never gets a 2xx from it, a refused request writes
nothing (row counts of every model of the site's apps unchanged), and a
physician's pages never carry a co-rater's or the Oracle's labels. The forms
are forged in test_forged_forms.py."""

from __future__ import annotations

import pytest
from django.urls import reverse

from exports.models import ApiToken
from exports.tokens import token_store
from tests.forged import (  # noqa: F401 - fixtures among them
    ROLES,
    Route,
    _isolated,
    call,
    client_for,
    model_counts,
    site_routes,
    url_of,
    world,
)

pytestmark = pytest.mark.django_db


METHODS = ("get", "post", "put", "delete")


# Pages only an admin may open: anyone signed in with another role gets a 403
# (accounts.access: a wrong role is a 403), never a 2xx.
ADMIN_ONLY = {
    "annotation:campaign_list",
    "annotation:campaign_new",
    "annotation:campaign_detail",
    "annotation:campaign_assignment_add",
    "annotation:campaign_assignment_reassign",
    "annotation:adjudication_queue",
    "annotation:adjudication_window",
    "annotation:adjudication_decide",
    "annotation:adjudication_merge",
    "annotation:adjudication_recompute_window",
    "annotation:irr_dashboard",
    "annotation:campaign_recompute",
    "annotation:campaign_recompute_progress",
    "annotation:calibration_draw",
    "annotation:calibration_draw_progress",
    "annotation:calibration_report",
    "annotation:calibration_adopt",
    "annotation:calibration_invite",
    "annotation:calibration_invitation_withdraw",
    "oracle:run_list",
    "oracle:run_new",
    "oracle:run_detail",
    "oracle:run_labels",
    "oracle:run_label",
    "oracle:run_progress",
    "oracle:run_cancel",
    "oracle:run_resume",
    "oracle:run_retry_failed",
    "oracle:run_validation",
    "oracle:run_validate",
    "oracle:validation_progress",
    "oracle:backbone_list",
    "oracle:backbone_new",
    "oracle:backbone_edit",
    "exports:submission_budget",
    "windows:import_list",
    "windows:import_start",
    "windows:import_progress",
    "windows:import_resume",
    "windows:import_cancel",
    "windows:build_resume",
    "windows:build_cancel",
    "exports_api:oracle_run_list",
    "exports_api:oracle_run_detail",
    "exports:release_build_start",
    "exports:release_new",
    "exports:release_retry",
    "exports:release_rebuild",
    "exports:release_cancel",
    "agents:run_start",
    "surveillance:stay_checkpoints",
    "datause:audit",
    "datause:credential_approve",
    "datause:attestation_approve",
}
# Agent runs and online evaluations: admins and researchers, never physicians
# (an agent's predictions are model labels: blindness).
NOT_FOR_PHYSICIANS = {
    "agents:run_list",
    "agents:endpoint_start",
    "agents:run_detail",
    "agents:run_cancel",
    "agents:run_resume",
    "agents:stay_memory",
    "datause:data_use",
    "datause:credential_record",
    "datause:credential_revoke",
    "datause:attestation_record",
    "datause:attestation_revoke",
}
# Pages of labelled data that a researcher (or anyone but a physician / admin)
# may not use either.
NOT_FOR_RESEARCHERS = {
    "annotation:queue",
    "annotation:annotate",
    "annotation:draft",
    "annotation:submit",
    "annotation:reopen",
    "annotation:suggest",
    "annotation:calibration_list",
    "annotation:calibration_judge",
    "annotation:calibration_judge_post",
    "windows:stay_list",
    "windows:stay_detail",
    "windows:window_detail",
    "windows:stay_tracks_json",
}


def refused(route: Route, role: str) -> bool:
    if role == "anonymous":
        return route.name not in {"home", "login", "logout", "api_schema", "api_docs"}
    if role == "admin":
        return False
    if route.name in ADMIN_ONLY:
        return True
    if role == "researcher" and route.name in NOT_FOR_RESEARCHERS:
        return True
    if role == "physician" and route.name in NOT_FOR_PHYSICIANS:
        return True
    return False


def test_every_url_pattern_is_walked():
    names = {r.name for r in site_routes()}
    assert {
        "annotation:annotate",
        "oracle:backbone_edit",
        "exports_api:release_file",
    } <= names
    assert ADMIN_ONLY <= names
    assert NOT_FOR_RESEARCHERS <= names
    assert NOT_FOR_PHYSICIANS <= names


@pytest.mark.parametrize("role", ROLES)
def test_no_url_answers_500_and_wrong_roles_get_no_2xx_and_write_nothing(world, role):
    client = client_for(world, role)
    problems = []
    counts = model_counts()  # carried from one request to the next
    for route in site_routes():
        if route.name == "logout":
            continue  # signs the client out: checked by its own view's tests
        url = url_of(route, world["ids"])
        for method in METHODS:
            user = world["users"][role]
            if user is not None:
                # The token pages (revoke, create) replace the user's key,
                # which is shown once: a new one is made for the next call.
                key = world["tokens"][role]
                if not ApiToken.objects.filter(user=user, prefix=key[:8]).exists():
                    key = world["tokens"][role] = token_store(user=user).key
                client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
            before = counts
            response, error = call(client, method, url)
            if error:
                problems.append(f"{role} {method.upper()} {url}: exception\n{error}")
                counts = model_counts()
                continue
            status = response.status_code
            counts = model_counts()
            if status >= 500:
                problems.append(f"{role} {method.upper()} {url}: {status}")
            if refused(route, role):
                if 200 <= status < 300:
                    problems.append(
                        f"{role} {method.upper()} {url}: {status} (refused role)"
                    )
                if role == "anonymous" and route.name.startswith("exports_api:"):
                    if status not in (401, 403):
                        problems.append(
                            f"{role} {method.upper()} {url}: {status} not 401"
                        )
                elif role == "anonymous" and method == "get" and status == 302:
                    if "/accounts/login/" not in response["Location"]:
                        problems.append(f"{role} GET {url}: redirect not to login")
                elif route.name.startswith("exports_api:") and method == "get":
                    if status not in (403, 404):
                        problems.append(f"{role} GET {url}: {status} not 403")
                elif (
                    route.name in ADMIN_ONLY
                    and method == "get"
                    and status
                    not in (
                        403,
                        405,  # a POST-only endpoint: the method is refused first
                    )
                ):
                    problems.append(f"{role} GET {url}: {status}, not 403")
                if counts != before:
                    problems.append(f"{role} {method.upper()} {url}: wrote rows")
    assert not problems, "\n".join(problems)


BAD_IDS = ("2147483648", "9223372036854775808", "99999999999999999999999")


@pytest.mark.parametrize("role", ("physician", "admin"))
def test_zero_huge_negative_and_text_ids_are_4xx_and_write_nothing(world, role):
    client = client_for(world, role)
    problems = []
    counts = model_counts()  # carried from one request to the next
    for route in site_routes():
        int_params = [p for p in route.params if p not in ("file_path", "name")]
        for param in int_params:
            sentinel = 987654321
            url = url_of(route, {**world["ids"], param: sentinel})
            zero = () if param == "index" else ("0",)  # window 0 exists
            for bad in zero + BAD_IDS + ("-1", "abc", "1.5", "%00"):
                forged = url.replace(str(sentinel), bad, 1)
                for method in ("get", "post"):
                    before = counts
                    response, error = call(client, method, forged)
                    if error:
                        problems.append(f"{role} {method} {forged}: exception\n{error}")
                        counts = model_counts()
                        continue
                    if (
                        not 400 <= response.status_code < 500
                        and response.status_code != 405
                    ):
                        problems.append(
                            f"{role} {method} {forged}: {response.status_code}"
                        )
                    counts = model_counts()
                    if counts != before:
                        problems.append(f"{role} {method} {forged}: wrote rows")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ("physician", "admin"))
def test_ids_of_other_peoples_objects_and_other_parents_are_refused(world, role):
    """Another physician's assignment, a window outside the campaign, a
    validation job of another run, a path outside the release: 4xx, nothing
    written."""
    client = client_for(world, role)
    problems = []
    counts = model_counts()  # carried from one request to the next
    for route in site_routes():
        # An admin may act on any assignment of a campaign: for an admin only
        # the other parents (window, run, release) are forged.
        swapped = [
            p
            for p in route.params
            if p in world["others"] and not (role == "admin" and p == "assignment_id")
        ]
        for param in swapped:
            url = url_of(route, {**world["ids"], param: world["others"][param]})
            for method in ("get", "post"):
                before = counts
                response, error = call(
                    client,
                    method,
                    url,
                    {"payload": '{"status": "stable"}', "base_version": "1"},
                )
                if error:
                    problems.append(f"{role} {method} {url}: exception\n{error}")
                    counts = model_counts()
                    continue
                if not 400 <= response.status_code < 500:
                    problems.append(f"{role} {method} {url}: {response.status_code}")
                counts = model_counts()
                if counts != before:
                    problems.append(f"{role} {method} {url}: wrote rows")
                assert b"Secret item" not in response.content, url
    assert not problems, "\n".join(problems)


def test_suggestions_never_carry_a_co_raters_items_on_a_window_one_rates(world):
    """Asked from the page of window 0, the suggestions once gave the
    co-rater's submitted items on window 1, which the physician rates too:
    hidden now while any window they share is open."""
    from django.utils import timezone

    from annotation.models import CampaignWindow
    from annotation.services import label_submit

    co_rater = world["co_rater"]
    campaign_id = world["ids"]["campaign_id"]
    from annotation.models import Assignment

    theirs = Assignment.objects.get(
        campaign_id=campaign_id, annotator=co_rater, window__index=1
    )
    label_submit(
        annotator=co_rater,
        assignment_id=theirs.pk,
        payload={
            "status": "stable",
            "acute_problems": [{"text": "Shared secret", "evidence": []}],
        },
        base_version=0,
    )
    client = client_for(world, "physician")
    url = reverse("annotation:suggest", args=[world["ids"]["assignment_id"]])
    query = {"field": "acute_problems", "q": "shared"}
    assert b"Shared secret" not in client.get(url, query).content
    CampaignWindow.objects.filter(campaign_id=campaign_id, window=theirs.window).update(
        adjudicated_at=timezone.now()
    )
    # Still hidden: they share window 0, still open, where the co-rater could
    # have written the same words (annotation.blindness; the canary crawl in
    # tests/annotation/test_blindness_canary.py shows them after closing).
    assert b"Shared secret" not in client.get(url, query).content


def test_physicians_never_see_a_co_raters_or_the_oracles_labels(world):
    """Before adjudication the physician's pages, the suggestions (for the
    window being labelled) and the window pages show neither the co-rater's
    draft nor the Oracle's items."""
    client = client_for(world, "physician")
    ids = world["ids"]
    urls = [
        reverse("annotation:queue"),
        reverse("annotation:annotate", args=[ids["assignment_id"]]),
        reverse("annotation:suggest", args=[ids["assignment_id"]])
        + "?field=acute_problems&q=secr",
        reverse("annotation:suggest", args=[ids["assignment_id"]])
        + "?field=acute_problems&q=oracle",
        reverse("windows:stay_detail", args=[ids["stay_id"]]),
        reverse("windows:window_detail", args=[ids["stay_id"], 0]),
        reverse("windows:stay_tracks_json", args=[ids["stay_id"]]),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"Secret item" not in response.content, url
        assert b"OracleOnly" not in response.content, url
