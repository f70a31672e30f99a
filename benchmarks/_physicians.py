"""Simulated physicians for annotate_load: each a thread with its own cookie
jar that logs in, opens its queue and assignments, saves a draft every 2 s as
the page's script does and submits, recording every latency and what the
server acknowledged (Results)."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

PASSWORD = "load bench pass 1"
DRAFT_INTERVAL_S = 2.0
REQUEST_TIMEOUT_S = 30
STATUSES = ("improving", "stable", "deteriorating")


@dataclass
class Results:
    lock: threading.Lock = field(default_factory=threading.Lock)
    draft_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)
    requests: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    # assignment id -> (last version the server acknowledged, payload sent)
    acked: dict[int, tuple[int, dict]] = field(default_factory=dict)
    # assignment id -> (version, submission id) of each acknowledged submit
    submitted: dict[int, tuple[int, str]] = field(default_factory=dict)
    login_failures: int = 0
    ready: int = 0
    go: threading.Event = field(default_factory=threading.Event)
    deadline: float = 0.0

    def error(self, what: str, detail: str) -> None:
        with self.lock:
            self.errors[what] += 1
            if len(self.error_samples) < 10:
                self.error_samples.append(f"{what}: {detail[:200]}")


CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
HX_HEADERS = re.compile(r"hx-headers='([^']+)'")
ASSIGNMENT_ROW = re.compile(r'data-assignment-id="(\d+)" data-state="(\w+)"')
FORM_VERSION = re.compile(r'data-version="(\d+)" data-submission-id="([0-9a-f]+)"')
ACTION_ID = re.compile(r'data-action-id="(\d+)"')


class Physician(threading.Thread):
    def __init__(
        self, *, base, username, results, drafts_before_submit, max_assignments, seed
    ):
        super().__init__(name=username, daemon=True)
        self.base = base
        self.username = username
        self.results = results
        self.drafts_before_submit = drafts_before_submit
        self.max_assignments = max_assignments
        self.rng = random.Random(seed)

    # HTTP helpers
    def _get(self, session, path, what):
        import requests

        started = time.perf_counter()
        try:
            response = session.get(self.base + path, timeout=REQUEST_TIMEOUT_S)
        except requests.RequestException as exc:
            self.results.error(f"{what} exception", repr(exc))
            return None, 0.0
        ms = (time.perf_counter() - started) * 1000
        with self.results.lock:
            self.results.requests[what] += 1
        if response.status_code != 200:
            self.results.error(f"{what} {response.status_code}", path)
            return None, ms
        return response, ms

    def _post_json(self, session, path, data, csrf, what):
        import requests

        headers = {
            "X-CSRFToken": csrf,
            "HX-Request": "true",
            "Accept": "application/json",
            "Referer": self.base + path,
        }
        started = time.perf_counter()
        try:
            response = session.post(
                self.base + path, data=data, headers=headers, timeout=REQUEST_TIMEOUT_S
            )
        except requests.RequestException as exc:
            self.results.error(f"{what} exception", repr(exc))
            return None, None
        ms = (time.perf_counter() - started) * 1000
        with self.results.lock:
            self.results.requests[what] += 1
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or not body.get("ok"):
            self.results.error(
                f"{what} {response.status_code}", f"{path} {json.dumps(body)[:150]}"
            )
            return None, ms
        return body, ms

    def _login(self, session) -> bool:
        page, _ = self._get(session, "/accounts/login/?next=/annotate/", "login page")
        if page is None:
            return False
        match = CSRF_INPUT.search(page.text)
        if not match:
            self.results.error("login page", "no CSRF token")
            return False
        response = session.post(
            self.base + "/accounts/login/",
            data={
                "csrfmiddlewaretoken": match.group(1),
                "username": self.username,
                "password": PASSWORD,
                "next": "/annotate/",
            },
            headers={"Referer": self.base + "/accounts/login/"},
            timeout=120,
            allow_redirects=False,
        )
        with self.results.lock:
            self.results.requests["login"] += 1
        if response.status_code != 302 or "sessionid" not in session.cookies:
            self.results.error(f"login {response.status_code}", self.username)
            return False
        return True

    def _payload(self, n: int, actions: list[int], complete: bool) -> dict:
        problems = [
            {"text": f"{self.username} problem {i + 1}", "evidence": []}
            for i in range(n)
        ]
        ratings = (
            [{"event_id": a, "rating": "acceptable", "evidence": []} for a in actions]
            if complete
            else [
                {"event_id": a, "rating": "", "evidence": []} for a in actions[: n % 2]
            ]
        )
        return {
            "status": STATUSES[n % 3] if (complete or n % 4) else "",
            "status_evidence": [],
            "action_ratings": ratings,
            "acute_problems": problems,
            "added_actions": [],
            "red_flags": [],
        }

    def run(self) -> None:
        import requests

        session = requests.Session()
        try:
            self._run(session)
        except Exception as exc:  # noqa: BLE001 - one client's crash must not hide the others' figures
            self.results.error("client exception", repr(exc))
        finally:
            session.close()

    def _run(self, session) -> None:
        # Warm-up, untimed: log in and open the queue; the timed work starts
        # when every physician is ready.
        try:
            ok = self._login(session)
        finally:
            with self.results.lock:
                self.results.ready += 1
        if not ok:
            with self.results.lock:
                self.results.login_failures += 1
            return
        if not self.results.go.wait(timeout=600):
            return
        # The warm-up may outlast the server's keep-alive: a connection it is
        # closing as it is reused would be reset. A browser back after a pause
        # opens a new one; so does this client.
        for adapter in session.adapters.values():
            adapter.close()
        self.deadline = self.results.deadline
        time.sleep(self.rng.uniform(0, DRAFT_INTERVAL_S))
        queue, _ = self._get(session, "/annotate/", "queue")
        if queue is None:
            return
        todo = [
            int(pk)
            for pk, state in ASSIGNMENT_ROW.findall(queue.text)
            if state != "submitted"
        ]
        for done, assignment_id in enumerate(todo):
            if time.monotonic() >= self.deadline or done >= self.max_assignments:
                return
            self._annotate(session, assignment_id)

    def _annotate(self, session, assignment_id: int) -> None:
        path = f"/annotate/{assignment_id}/"
        page, ms = self._get(session, path, "annotate page")
        if page is None:
            return
        with self.results.lock:
            self.results.page_ms.append(ms)
        csrf_match = HX_HEADERS.search(page.text)
        form_match = FORM_VERSION.search(page.text)
        if not csrf_match or not form_match:
            self.results.error("annotate page", f"{path} lacks CSRF or version")
            return
        csrf = json.loads(csrf_match.group(1))["X-CSRFToken"]
        version = int(form_match.group(1))
        submission_id = form_match.group(2)
        actions = list(dict.fromkeys(int(a) for a in ACTION_ID.findall(page.text)))
        active = 0
        for n in range(1, self.drafts_before_submit + 2):
            next_at = time.monotonic() + DRAFT_INTERVAL_S
            if next_at > self.deadline:
                return  # out of time: the assignment stays a draft
            time.sleep(max(0.0, next_at - time.monotonic()))
            active += int(DRAFT_INTERVAL_S)
            last = n > self.drafts_before_submit
            payload = self._payload(n, actions, complete=last)
            data = {
                "payload": json.dumps(payload),
                "base_version": str(version),
                "active_seconds": str(active),
            }
            if last:
                data["submission_id"] = submission_id
            what = "submit" if last else "draft"
            body, ms = self._post_json(
                session, f"/annotate/{assignment_id}/{what}/", data, csrf, what
            )
            if ms is not None:
                with self.results.lock:
                    (self.results.submit_ms if last else self.results.draft_ms).append(
                        ms
                    )
            if body is None:
                return  # refused: a real page would show the conflict and stop
            version = int(body["version"])
            active = 0
            with self.results.lock:
                self.results.acked[assignment_id] = (version, payload)
                if last:
                    self.results.submitted[assignment_id] = (version, submission_id)
        # The browser follows the submit's redirect to the next window; the next
        # loop turn opens it.
