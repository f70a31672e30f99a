"""The client's exceptions: one base class, so that a script can catch every
failure of the client with one ``except``."""

from __future__ import annotations


class RealICUError(Exception):
    """Any failure of the RealICU client."""


class ConnectionFailed(RealICUError):
    """The server could not be reached (refused, DNS, timeout)."""


class APIError(RealICUError):
    """The API answered with an HTTP error; ``message`` is the API's own text.

    ``status`` is the HTTP status (401 bad or expired token, 403 not a
    researcher, 404 no such release or submission, 400 invalid input with one
    message per problem, 409 a release not ready, 429 throttled)."""

    def __init__(self, *, status: int, message: str, url: str, body=None):
        self.status = status
        self.message = message
        self.url = url
        self.body = body
        super().__init__(f"HTTP {status} from {url}: {message}")


class ChecksumMismatch(RealICUError):
    """A downloaded file is not the file the release's manifest lists (size or
    sha256 differs). Nothing is left at the file's path."""

    def __init__(self, *, path: str, expected: str, actual: str):
        self.path = path
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{path}: downloaded content does not match the release manifest "
            f"(expected {expected}, got {actual}); the file was discarded. "
            "Download it again; if it keeps failing, tell the release's admin."
        )


class ScoringFailed(RealICUError):
    """The server could not score a submission; ``error`` is its reason."""

    def __init__(self, *, submission_id: int, error: str):
        self.submission_id = submission_id
        self.error = error
        super().__init__(f"Submission {submission_id} failed to score: {error}")


class ScoringTimeout(RealICUError):
    """A submission was still queued or scoring when the wait ran out."""
