"""A fake OpenAI-compatible chat-completions server: a real HTTP server on
loopback (loopback.LoopbackServer, in a thread), for the Oracle's tests
and benchmarks. Nothing in it is patched into the code under test: the backbone
talks HTTP to it like to vLLM or OpenAI.

    fake = FakeLLM(latency=0.3).start()      # or the pytest fixture ``fake_llm``
    fake.base_url                            # "http://127.0.0.1:<port>/v1"
    fake.push(status=429, headers={"Retry-After": "1"})
    fake.push(content='{"status": ...}')     # a chat completion with this text
    fake.push(status=200, body="not json")   # a raw body
    fake.push(content=..., delay=2.0)        # reply after 2 s (timeouts)
    ...                                      # run the backbone
    fake.requests                            # what arrived: RecordedRequest list
    fake.max_in_flight                       # most requests open at once
    fake.stop()

Scripted responses are served first, in order, one per POST to
``/v1/chat/completions``; any other path gets a 404 and is not recorded. When the script is empty the server is in default
mode: after ``latency`` seconds it answers validly from the prompt itself. It
reads the event ids shown in square brackets ("[123]") and the line "Event ids
to rate: 1, 2" of oracle.prompts, and returns status "stable" citing the first
shown id, one acute problem citing it, every action to rate rated "acceptable",
and empty added actions and red flags, with a ``usage`` block. Default mode
serves many concurrent requests (a thread per connection, keep-alive, a listen
backlog of 1024), so the Oracle worker and throughput benchmarks can point
real runs at it.

As a process (for benchmarks with several worker processes):

    python -m tests.oracle.fake_llm --port 8765 --latency 0.3
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from loopback import LoopbackServer, QuietHandler

_IDS = re.compile(r"\[(\d+)\]")
_TO_RATE = re.compile(r"Event ids to rate: ([^\n]*)")


@dataclass
class Scripted:
    """One scripted reply: ``content`` wraps the text in a chat completion;
    ``body`` (str or dict) is sent as is instead; ``delay`` in seconds before
    the reply."""

    status: int = 200
    headers: dict = field(default_factory=dict)
    body: object = None
    content: str | None = None
    delay: float = 0.0
    usage: dict | None = None


@dataclass
class RecordedRequest:
    path: str
    headers: dict
    body: object
    arrived: float  # time.monotonic()
    finished: float = 0.0


def completion(content: str, *, usage: dict | None = None, model: str = "fake") -> dict:
    """A chat-completions response body carrying ``content``."""
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if usage is not False:
        body["usage"] = usage or {
            "prompt_tokens": 1000,
            "completion_tokens": max(1, len(content) // 4),
            "total_tokens": 1000 + max(1, len(content) // 4),
        }
    return body


def valid_reply_for(messages: list[dict]) -> str:
    """A valid label (oracle.schema) for the prompt in ``messages``."""
    prompt = "\n".join(
        str(m.get("content") or "") for m in messages if m.get("role") == "user"
    )
    to_rate: list[int] = []
    match = _TO_RATE.search(prompt)
    if match and match.group(1).strip() != "none":
        to_rate = [int(x) for x in re.findall(r"\d+", match.group(1))]
    shown = [int(x) for x in _IDS.findall(prompt)]
    first = [shown[0]] if shown else []
    reply = {
        "status": "stable",
        "status_evidence": first,
        "acute_problems": [
            {"text": "haemodynamic monitoring needed", "evidence": first}
        ]
        if first
        else [],
        "action_ratings": [
            {"event_id": pk, "rating": "acceptable", "evidence": []} for pk in to_rate
        ],
        "added_actions": [],
        "red_flags": [],
    }
    return json.dumps(reply)


class FakeLLM(LoopbackServer):
    """The server; see the module docstring."""

    def __init__(self, *, latency: float = 0.0, host: str = "127.0.0.1", port: int = 0):
        self.latency = latency
        # Set, the server counts prompts at this many characters a token: in
        # ``usage`` and on llama-cpp-python's /extras/tokenize/count.
        self.prompt_chars_per_token: float | None = None
        self.counted = 0
        self.host, self.port = host, port
        self._script: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0

    # --- control ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def push(self, **fields) -> FakeLLM:
        """Queue one scripted reply (fields of Scripted)."""
        with self._lock:
            self._script.append(Scripted(**fields))
        return self

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.max_in_flight = 0

    def handler(self):
        fake = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                fake._handle(self)

            def do_GET(self):
                fake._handle(self)

        return Handler

    # --- serving --------------------------------------------------------------------

    def _handle(self, handler: QuietHandler) -> None:
        arrived = time.monotonic()
        raw = handler.request_body()
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if (
            handler.path.rstrip("/").endswith("/extras/tokenize/count")
            and self.prompt_chars_per_token
            and isinstance(body, dict)
        ):
            # llama-cpp-python's token count, at ``prompt_chars_per_token``.
            self.counted += 1
            count = int(len(str(body.get("input") or "")) / self.prompt_chars_per_token)
            handler.send_json(200, {"count": count})
            return
        if not handler.path.rstrip("/").endswith("/chat/completions"):
            # Not a chat completion (a backbone asking what server this is):
            # not recorded, and the script is kept for the completions.
            try:
                handler.send_json(404, {"error": {"message": "not found"}})
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        record = RecordedRequest(
            path=handler.path,
            headers=dict(handler.headers.items()),
            body=body,
            arrived=arrived,
        )
        with self._lock:
            self.requests.append(record)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            scripted = self._script.popleft() if self._script else None
        try:
            messages = body.get("messages", []) if isinstance(body, dict) else []
            if scripted is None:
                time.sleep(self.latency)
                content = valid_reply_for(messages)
                handler.send_json(200, completion(content, usage=self._usage(messages)))
                return
            if scripted.delay:
                time.sleep(scripted.delay)
            if scripted.content is not None:
                payload = completion(
                    scripted.content, usage=scripted.usage or self._usage(messages)
                )
            elif scripted.body is not None:
                payload = scripted.body
            else:
                payload = {"error": {"message": f"scripted status {scripted.status}"}}
            if isinstance(payload, str):  # a raw body, JSON or not
                handler.send_body(scripted.status, payload.encode(), scripted.headers)
            else:
                handler.send_json(scripted.status, payload, scripted.headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)
        finally:
            with self._lock:
                self.in_flight -= 1
                record.finished = time.monotonic()

    def _usage(self, messages) -> dict | None:
        """With ``prompt_chars_per_token`` set, usage counts the prompt at
        that ratio (a client that learns its ratio from the server's counts
        then learns a plausible one); else the fixed default."""
        if not self.prompt_chars_per_token:
            return None
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        prompt = max(1, int(chars / self.prompt_chars_per_token))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": 20,
            "total_tokens": prompt + 20,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Fake OpenAI-compatible server (default mode)."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.3, help="Seconds per reply.")
    args = parser.parse_args()
    fake = FakeLLM(latency=args.latency, host=args.host, port=args.port).start()
    print(fake.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
