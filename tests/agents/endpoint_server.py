"""A researcher's endpoint played by the agents tests: an agent on loopback
that speaks the online-evaluation protocol, scripted reply by reply, and can
try the platform's API as a cheater would."""

import json

import httpx
from realicu_client import SessionGap, Sessions

from loopback import LoopbackServer, QuietHandler


class Endpoint(LoopbackServer):
    """An agent on loopback that follows the protocol's sessions
    (realicu_client.Sessions: each request's ``context`` is the window's
    context it rebuilt, None for a gap, answered 409). ``replies`` (a list)
    scripts (status, body, headers) per request; then a valid prediction with
    extra fields asking for more. With ``api``, each request also tries the
    platform's API."""

    def __init__(self, *, api: str = "", release_id: int = 0):
        self.received: list[dict] = []
        self.sessions = Sessions()
        self.replies: list = []
        self.api, self.release_id = api, release_id
        self.api_answers: list[tuple[str, int, str]] = []
        self.start()

    def handler(self):
        outer = self

        class Handler(QuietHandler):
            def do_POST(self):
                raw = self.request_body()
                outer.received.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": json.loads(raw),
                    }
                )
                body = outer.received[-1]["body"]
                try:
                    context = outer.sessions.receive(body)
                except SessionGap:
                    context = None
                outer.received[-1]["context"] = context
                if outer.api:
                    outer.cheat(body)
                if outer.replies:
                    status, reply, headers = outer.replies.pop(0)
                elif context is None:
                    status, reply, headers = 409, {"error": "session gap"}, {}
                else:
                    status, headers = 200, {}
                    reply = {
                        "status": "stable",
                        "acute_problems": ["Septic shock"],
                        "recommended_actions": ["Fluid bolus"],
                        "need_more": ["future_events", "outcome"],
                        "next": "/?give=all_events",
                    }
                self.send_json(status, reply, headers)

        return Handler

    @property
    def url(self) -> str:
        return f"{self.root}/predict"

    def cheat(self, body: dict) -> None:
        """Ask the platform for the stay's whole context, as anyone could."""
        paths = [
            "/api/v1/releases/",
            f"/api/v1/releases/{self.release_id}/files/context/{body['stay_id']}.jsonl",
            f"/api/v1/releases/{self.release_id}/windows/?stay_id={body['stay_id']}",
        ]
        for path in paths:
            answer = httpx.get(self.api + path, timeout=10)
            self.api_answers.append((path, answer.status_code, answer.text))
