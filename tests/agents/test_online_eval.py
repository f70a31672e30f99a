"""Online evaluation: a researcher's endpoint gets, per window, only the bedside
context before the window's end. A cheating endpoint that asks for more (extra
fields in its reply, a redirect with query parameters, requests of its own to
the platform's API) obtains no event at or after any window's end: asserted
over every payload it received, and over every window's context it rebuilt
from the streamed payloads (realicu_client.Sessions). Malformed replies are
that window's error; retries, URL restrictions and roles as for backbones."""

from datetime import datetime

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from accounts.roles import Role
from agents.models import AgentPrediction, OnlineEndpoint, RunState
from agents.remote import UNREACHABLE
from agents.services import endpoint_register
from tests.agents.endpoint_server import Endpoint
from tests.agents.helpers import online_eval_inline
from tests.annotation.conftest import make_role_user

PAYLOAD_KEYS = {
    "protocol",
    "session_id",
    "sequence",
    "context_mode",
    "events_total",
    "past_windows_total",
    "stay_id",
    "window_id",
    "window_index",
    "start",
    "end",
    "hours_since_admission",
    "static",
    "past_windows",
    "events",
}


def _assert_leak_free(received: list[dict], tiny_stays):
    events = tiny_stays["events"]
    never = {events["death_early"].pk, events["disposition"].pk}
    assert received
    for request in received:
        body = request["body"]
        assert set(body) == PAYLOAD_KEYS
        assert body["protocol"] == request["headers"]["X-RealICU-Protocol"]
        assert "?" not in request["path"]
        assert not {"authorization", "cookie"} & {k.lower() for k in request["headers"]}
        _assert_window_clean(body, never)
        if request["context"] is not None:
            _assert_window_clean(request["context"], never)


def _assert_window_clean(body: dict, never: set) -> None:
    """A payload, or a window's context rebuilt from its session, holds no
    event at or after the window's end and nothing of hindsight."""
    end = datetime.fromisoformat(body["end"])
    for event in body["events"]:
        assert datetime.fromisoformat(event["time"]) < end, (event, body["end"])
        assert event["event_id"] not in never
        assert event["kind"] not in ("outcome", "coded")
    for past in body["past_windows"]:
        assert datetime.fromisoformat(past["end"]) <= datetime.fromisoformat(
            body["start"]
        )
    # Known at ICU admission only: the ICD-derived disease group is
    # hindsight and never reaches an endpoint.
    assert set(body["static"]) == {"age", "sex", "care_unit", "admission_type"}


@pytest.mark.django_db(transaction=True)
def test_a_cheating_endpoint_gets_no_future_event(
    live_server, researcher, tiny_release, tiny_stays
):
    cheater = Endpoint(api=live_server.url, release_id=tiny_release.pk)
    try:
        # The first window: a redirect that asks for everything, with query
        # parameters; it is not followed.
        cheater.replies.append(
            (307, {"give": "everything"}, {"Location": cheater.url + "?all=1"})
        )
        run = online_eval_inline(
            user=researcher, release=tiny_release, name="cheater", url=cheater.url
        )
    finally:
        cheater.stop()
    assert run.state == RunState.DONE
    # Four windows, four requests: the redirect was not followed, nor the
    # reply's "next" asked for.
    assert len(cheater.received) == 4
    _assert_leak_free(cheater.received, tiny_stays)
    # Window A1 [2 h, 2.5 h) got what came before it, not the event at its end.
    events = tiny_stays["events"]
    a1 = [r["context"] for r in cheater.received if r["body"]["window_index"] == 1]
    ids = {e["event_id"] for e in a1[0]["events"]}
    assert events["between"].pk in ids and events["before_icu"].pk in ids
    assert events["at_end"].pk not in ids and events["after"].pk not in ids
    # Its own requests to the API were refused: it holds no credentials.
    assert len(cheater.api_answers) == 12
    assert {status for _, status, _ in cheater.api_answers} <= {401, 403}
    assert not any("hours_since_admit" in text for _, _, text in cheater.api_answers)
    # The redirect is one more failure to reach the endpoint for its owner;
    # its status is kept for admins.
    (failed,) = AgentPrediction.objects.filter(run=run).exclude(error="")
    assert failed.error == UNREACHABLE
    assert "HTTP 307" in failed.error_detail
    # The extra fields of the replies were dropped.
    kept = AgentPrediction.objects.filter(run=run, error="").first().prediction
    assert set(kept) == {"status", "acute_problems", "recommended_actions"}
    assert run.submission.baseline["endpoint"] == cheater.url
    assert run.submission.baseline["plumbing_only"] is False


@pytest.mark.django_db
def test_malformed_replies_are_the_windows_errors(endpoint, researcher, tiny_release):
    endpoint.replies += [
        (200, {"status": "great"}, {}),
        (200, ["not", "an", "object"], {}),
        (503, {"busy": True}, {"Retry-After": "0"}),
    ]
    run = online_eval_inline(
        user=researcher,
        release=tiny_release,
        name="sloppy",
        url=endpoint.url,
        max_retries=2,
    )
    errors = sorted(
        AgentPrediction.objects.filter(run=run)
        .exclude(error="")
        .values_list("error", flat=True)
    )
    assert len(errors) == 2
    assert any("status 'great' is not one of" in e for e in errors)
    assert any("not a JSON object" in e for e in errors)
    # The 503 was retried: five requests for four windows.
    assert len(endpoint.received) == 5
    assert run.windows_failed == 2 and run.state == RunState.DONE


@pytest.mark.django_db
def test_the_url_is_restricted_and_only_researchers_register(researcher, tiny_release):
    for url in ("http://169.254.169.254/latest", "ftp://example.org/x", "nope"):
        with pytest.raises(ValidationError):
            endpoint_register(user=researcher, release=tiny_release, name="x", url=url)
    physician = make_role_user(Role.PHYSICIAN)
    with pytest.raises(PermissionDenied):
        endpoint_register(
            user=physician,
            release=tiny_release,
            name="x",
            url="http://127.0.0.1:9/predict",
        )
    assert not OnlineEndpoint.objects.exists()
