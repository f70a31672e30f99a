"""realicu_client: the researchers' Python client of the RealICU API.

    from realicu_client import Client

    api = Client("http://127.0.0.1:8000", token="<key>")
    release = api.releases()[0]
    for window in api.iterate_windows(release["id"], "data"):
        ...  # window.record, window.context: events strictly before its end
    submission = api.submit(release["id"], "predictions.jsonl", model_name="mine")
    scores = api.wait_for_scores(submission["id"])

An online-evaluation endpoint rebuilds each window's context from streamed
payloads with ``Sessions`` (realicu_client.endpoint).

No Django import and no dependency beyond the standard library."""

from realicu_client.api import Client
from realicu_client.context import (
    StayContext,
    Window,
    bedside_context,
    iterate_windows,
    parse_time,
)
from realicu_client.endpoint import SessionGap, Sessions
from realicu_client.errors import (
    APIError,
    ChecksumMismatch,
    ConnectionFailed,
    RealICUError,
    ScoringFailed,
    ScoringTimeout,
)

__all__ = [
    "APIError",
    "ChecksumMismatch",
    "Client",
    "ConnectionFailed",
    "RealICUError",
    "ScoringFailed",
    "ScoringTimeout",
    "SessionGap",
    "Sessions",
    "StayContext",
    "Window",
    "bedside_context",
    "iterate_windows",
    "parse_time",
]
