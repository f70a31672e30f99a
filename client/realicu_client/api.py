"""The HTTP side of the client: token authentication, pagination, verified
downloads, submissions and their scores, over ``urllib`` (no dependency)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from realicu_client.context import Window, inside, iterate_windows
from realicu_client.errors import (
    APIError,
    ChecksumMismatch,
    ConnectionFailed,
    RealICUError,
    ScoringFailed,
    ScoringTimeout,
)

CHUNK = 256 * 1024
# A throttled request (429) is retried after the server's Retry-After, this
# many times, never waiting longer than MAX_RETRY_WAIT seconds at once.
THROTTLE_RETRIES = 5
MAX_RETRY_WAIT = 60.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # urllib would follow a redirect with the Authorization header, to any host:
    # the API never redirects, so a redirect is an error, and the token stays.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _message(body: bytes) -> tuple[str, object]:
    """The API's message in an error body: ``detail`` (a text or a list of
    texts, one per invalid line) or a field's errors."""
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return (text[:500] or "no message"), None
    if isinstance(data, dict):
        parts = []
        for key, value in data.items():
            texts = value if isinstance(value, list) else [value]
            prefix = "" if key == "detail" else f"{key}: "
            parts.extend(f"{prefix}{text}" for text in texts)
        return "; ".join(str(part) for part in parts) or "no message", data
    return str(data), data


class Client:
    """The RealICU researcher API.

    ``base_url`` is the site (``http://127.0.0.1:8000``) or its API root
    (``.../api/v1``); ``token`` is the key from Releases -> "Your API token"."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0):
        base = base_url.rstrip("/")
        if not base.endswith("/api/v1"):
            base += "/api/v1"
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise RealICUError(f"{base_url!r} is not an http(s) URL.")
        self.api = base + "/"
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._token = token.strip()
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    # HTTP -------------------------------------------------------------------

    def _url(self, path: str, params: dict | None = None) -> str:
        url = path if path.startswith(self._origin + "/") else self.api + path
        if params:
            query = {k: v for k, v in params.items() if v is not None}
            url += "?" + urllib.parse.urlencode(query)
        return url

    def _open(self, method: str, url: str, *, data=None, headers=None):
        headers = {
            "Authorization": f"Token {self._token}",
            "Accept": "application/json",
            "User-Agent": "realicu-client/0.1",
            **(headers or {}),
        }
        for attempt in range(THROTTLE_RETRIES + 1):
            request = urllib.request.Request(
                url, data=data, method=method, headers=headers
            )
            try:
                return self._opener.open(request, timeout=self.timeout)
            except urllib.error.HTTPError as error:
                body = error.read()
                if error.code == 429 and attempt < THROTTLE_RETRIES:
                    wait = error.headers.get("Retry-After") or "1"
                    try:
                        seconds = float(wait)
                    except ValueError:
                        seconds = 1.0
                    time.sleep(min(max(seconds, 0.1), MAX_RETRY_WAIT))
                    continue
                message, parsed = _message(body)
                if 300 <= error.code < 400:
                    message = (
                        f"the API redirected to {error.headers.get('Location')!r}; "
                        "check the base URL"
                    )
                raise APIError(
                    status=error.code, message=message, url=url, body=parsed
                ) from None
            except (urllib.error.URLError, TimeoutError, OSError) as error:
                reason = getattr(error, "reason", error)
                raise ConnectionFailed(f"Could not reach {url}: {reason}") from None
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, *, params=None, data=None, headers=None):
        with self._open(
            method, self._url(path, params), data=data, headers=headers
        ) as response:
            return json.loads(response.read())

    def _pages(self, path: str, params: dict | None = None) -> Iterator[dict]:
        url = self._url(path, params)
        while url:
            page = self._json("GET", url)
            yield from page["results"]
            url = page.get("next")
            if url:
                # The next page's path and query, on the origin the client was
                # given: the token goes there only, and a proxy that makes the
                # server see another scheme or host does not matter.
                parts = urllib.parse.urlsplit(url)
                url = (
                    self._origin
                    + parts.path
                    + (f"?{parts.query}" if parts.query else "")
                )

    # Releases ---------------------------------------------------------------

    def releases(self) -> list[dict]:
        """Every release you may use (each with its manifest and files)."""
        return list(self._pages("releases/"))

    def release(self, release_id: int) -> dict:
        return self._json("GET", f"releases/{int(release_id)}/")

    def windows(self, release_id: int, **filters) -> Iterator[dict]:
        """The release's window records through the API, filtered by
        ``stay_id``, ``disease_group``, ``hours_min``, ``hours_max``."""
        return self._pages(f"releases/{int(release_id)}/windows/", filters)

    def download(
        self,
        release_id: int,
        folder: str | Path,
        *,
        paths: Iterable[str] | None = None,
    ) -> Path:
        """Downloads the release's files (or ``paths`` of them) into
        ``folder/<release name>/`` and returns that folder. Each file is
        streamed to a temporary name, its size and sha256 checked against the
        manifest, and only then renamed into place: a corrupted download raises
        ``ChecksumMismatch`` and leaves no file under its name. A file already
        there with the manifest's checksum is not downloaded again."""
        release = self.release(release_id)
        target = Path(folder) / release["name"]
        target.mkdir(parents=True, exist_ok=True)
        listed = {entry["path"]: entry for entry in release["files"]}
        manifest_files = {
            entry["path"]: entry
            for entry in (release.get("manifest") or {}).get("files", [])
        }
        for path, entry in manifest_files.items():
            if path in listed and listed[path]["sha256"] != entry["sha256"]:
                raise RealICUError(
                    f"{path}: the release's file list and its manifest disagree "
                    "on the checksum; tell the release's admin."
                )
        wanted = list(listed) if paths is None else list(paths)
        unknown = [path for path in wanted if path not in listed]
        if unknown:
            raise RealICUError(
                f"Not files of {release['name']}: {', '.join(sorted(unknown))}."
            )
        for path in wanted:
            self._download_file(release, listed[path], target)
        return target

    def _download_file(self, release: dict, entry: dict, target: Path) -> None:
        final = inside(target, entry["path"])
        if final.is_file() and _file_matches(final, entry):
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(f".{final.name}.{uuid.uuid4().hex}.part")
        digest = hashlib.sha256()
        size = 0
        url = self._url(
            f"releases/{release['id']}/files/{urllib.parse.quote(entry['path'])}"
        )
        try:
            with (
                self._open("GET", url, headers={"Accept": "*/*"}) as response,
                open(partial, "wb") as out,
            ):
                while block := response.read(CHUNK):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
            if size != entry["bytes"] or digest.hexdigest() != entry["sha256"]:
                raise ChecksumMismatch(
                    path=entry["path"],
                    expected=f"{entry['bytes']} bytes, sha256 {entry['sha256']}",
                    actual=f"{size} bytes, sha256 {digest.hexdigest()}",
                )
            os.replace(partial, final)
        except BaseException:
            partial.unlink(missing_ok=True)
            # A stale file under the name would claim to be the good one.
            if final.is_file() and not _file_matches(final, entry):
                final.unlink()
            raise

    def iterate_windows(
        self,
        release_id: int,
        folder: str | Path,
        *,
        stay_ids: Iterable[int] | None = None,
        include_window_actions: bool = False,
    ) -> Iterator[Window]:
        """Every window of the release with its leak-free bedside context
        (``realicu_client.context``): downloads (verified) ``windows.jsonl`` and
        the context files it needs into ``folder``, then reads them."""
        target = self.download(release_id, folder, paths=["windows.jsonl"])
        wanted = None if stay_ids is None else set(stay_ids)
        stays = set()
        context_files = []
        for line in (target / "windows.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if (wanted is None or record["stay_id"] in wanted) and record[
                "stay_id"
            ] not in stays:
                stays.add(record["stay_id"])
                context_files.append(record["context_file"])
        self.download(release_id, folder, paths=context_files)
        return iterate_windows(
            target, stay_ids=wanted, include_window_actions=include_window_actions
        )

    # Submissions ------------------------------------------------------------

    def submit(
        self,
        release_id: int,
        predictions: str | Path | Iterable[dict],
        *,
        model_name: str,
        k: int = 5,
        public: bool = False,
    ) -> dict:
        """Submits predictions (a JSONL file's path, or the prediction objects:
        ``{window_id, status, acute_problems, recommended_actions}``) and
        returns the queued submission. An invalid file is refused with an
        ``APIError`` (400) whose message names every bad line; nothing is
        stored."""
        if isinstance(predictions, (str, Path)):
            content = Path(predictions).read_bytes()
        else:
            content = b"".join(
                json.dumps(p, ensure_ascii=False).encode() + b"\n" for p in predictions
            )
        boundary = uuid.uuid4().hex
        body = io.BytesIO()
        for name, value in (
            ("model_name", model_name),
            ("k", str(int(k))),
            ("public", "true" if public else "false"),
        ):
            body.write(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
                f"\r\n\r\n{value}\r\n".encode()
            )
        body.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="predictions.jsonl"\r\nContent-Type: application/x-ndjson'
            "\r\n\r\n".encode()
        )
        body.write(content)
        body.write(f"\r\n--{boundary}--\r\n".encode())
        return self._json(
            "POST",
            f"releases/{int(release_id)}/submissions/",
            data=body.getvalue(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )

    def submission(self, submission_id: int) -> dict:
        return self._json("GET", f"submissions/{int(submission_id)}/")

    def submissions(self, release_id: int) -> list[dict]:
        """Your submissions for a release."""
        return list(self._pages(f"releases/{int(release_id)}/submissions/"))

    def wait_for_scores(
        self, submission_id: int, *, timeout: float = 600.0, interval: float = 2.0
    ) -> dict:
        """Polls the submission until it is scored and returns its scores
        (``overall``, ``by_disease_group``, ``by_hours_since_admit``). A failed
        scoring raises ``ScoringFailed`` with the server's reason; still queued
        or scoring after ``timeout`` seconds raises ``ScoringTimeout``."""
        deadline = time.monotonic() + timeout
        while True:
            submission = self.submission(submission_id)
            if submission["state"] == "scored":
                return submission["scores"]
            if submission["state"] == "failed":
                raise ScoringFailed(
                    submission_id=submission_id,
                    error=submission.get("error") or "no reason given",
                )
            if time.monotonic() >= deadline:
                raise ScoringTimeout(
                    f"Submission {submission_id} is still {submission['state']} "
                    f"after {timeout:g} s; call wait_for_scores again later."
                )
            time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))

    def publish(self, submission_id: int, *, public: bool = True) -> dict:
        """Shows your submission on the release's leaderboard, or hides it."""
        return self._json(
            "POST",
            f"submissions/{int(submission_id)}/publish/",
            data=json.dumps({"public": public}).encode(),
            headers={"Content-Type": "application/json"},
        )


def _file_matches(path: Path, entry: dict) -> bool:
    if path.stat().st_size != entry["bytes"]:
        return False
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest() == entry["sha256"]
