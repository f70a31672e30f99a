"""Serving a release file, the one path of the pages and the API: the
user's access (a refusal logged), the file checked against its recorded
checksum, ETag and Range answered, and the download logged."""

from __future__ import annotations

import json
import re

from django.conf import settings
from django.http import (
    FileResponse,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.utils.http import content_disposition_header, parse_etags, quote_etag
from rest_framework.renderers import BaseRenderer

from datause import services as datause_services
from datause.selectors import CredentialRequired
from exports import selectors
from exports.building import ReleaseFileChanged, release_file_verify
from realicu_web.storage import StoredFile

CHUNK = 64 * 1024


def release_file_serve(request, *, release_id: int, file_path: str):
    """The response that serves ``file_path`` of the release to the request's
    user (file_response), the download logged; None when there is no such
    file. Raises ``CredentialRequired`` (the refusal logged) and
    ``ReleaseFileChanged`` (its ``release`` set) for the page that says so."""
    try:
        found = selectors.release_file_get(
            user=request.user, release_id=release_id, path=file_path
        )
    except CredentialRequired as refusal:
        datause_services.download_refused_record(
            user=request.user,
            release=refusal.release,
            path=file_path,
            reason=str(refusal),
        )
        raise
    if found is None:
        return None
    entry, path = found
    try:
        release_file_verify(entry=entry, path=path)
    except ReleaseFileChanged as error:
        error.release = entry.release
        raise
    response = file_response(request, entry, path)
    if response.status_code != 304:
        datause_services.download_record(
            user=request.user, release=entry.release, path=entry.path
        )
    return response


class AnyFileRenderer(BaseRenderer):
    """Lets a download be asked for with any Accept header; error bodies are
    still JSON."""

    media_type = "*/*"
    format = "file"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, (bytes, bytearray)):
            return data
        return json.dumps(data).encode()


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$", re.ASCII)
_BEYOND_ANY_FILE = 10**18


def _byte_range(header: str, size: int) -> tuple[int, int] | None | str:
    """(first, last) byte of a single ``Range`` (RFC 9110 section 14.1.2),
    ``None`` to ignore the header (syntax not understood, several ranges), or
    ``"unsatisfiable"``."""
    match = _RANGE.match(header.strip())
    if not match:
        return None
    # A position longer than any file's size reads as "beyond the end": int()
    # of thousands of digits is slow, and past 4,300 a ValueError (a 500).
    first, last = (
        (str(_BEYOND_ANY_FILE) if len(part) > 18 else part) for part in match.groups()
    )
    if not first and not last:
        return None
    if not first:  # the last N bytes
        suffix = int(last)
        if suffix == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    first_byte = int(first)
    last_byte = int(last) if last else size - 1
    if last and last_byte < first_byte:
        return None
    if first_byte >= size:
        return "unsatisfiable"
    return first_byte, min(last_byte, size - 1)


def _file_slice(path, first: int, length: int):
    if isinstance(path, StoredFile):
        yield from path.chunks(first, length)
        return
    with open(path, "rb") as handle:
        handle.seek(first)
        left = length
        while left > 0:
            block = handle.read(min(CHUNK, left))
            if not block:
                break
            left -= len(block)
            yield block


def file_response(request, entry, path):
    """A release file: 304 when If-None-Match names its ETag (the sha256), 206
    with Content-Range for a satisfiable single Range (unless If-Range names
    another version), 416 for an unsatisfiable one, else the whole file.
    ``path`` is the local file or its object in the store (realicu_web.storage),
    which goes out in blocks or, when settings say so, as a redirect to a
    short-lived presigned address."""
    etag = quote_etag(entry.sha256)
    stored = isinstance(path, StoredFile)
    size = path.size() if stored else path.stat().st_size
    content_type = (
        "application/json"
        if entry.path.endswith(".json")
        else "application/x-ndjson"
        if entry.path.endswith(".jsonl")
        else "text/markdown; charset=utf-8"
        if entry.path.endswith(".md")
        else "image/png"
        if entry.path.endswith(".png")
        else "image/svg+xml"
        if entry.path.endswith(".svg")
        else "application/octet-stream"
    )
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match and (
        if_none_match.strip() == "*" or etag in parse_etags(if_none_match)
    ):
        response = HttpResponse(status=304)
        response["ETag"] = etag
        return response
    wanted = request.headers.get("Range")
    if_range = request.headers.get("If-Range")
    if wanted and if_range and if_range.strip() != etag:
        wanted = None
    if wanted:
        span = _byte_range(wanted, size)
        if span == "unsatisfiable":
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{size}"
            response["ETag"] = etag
            response["Accept-Ranges"] = "bytes"
            return response
        if span is not None:
            first, last = span
            length = last - first + 1
            response = StreamingHttpResponse(
                _file_slice(path, first, length), status=206, content_type=content_type
            )
            response["Content-Range"] = f"bytes {first}-{last}/{size}"
            response["Content-Length"] = str(length)
            response["ETag"] = etag
            response["Accept-Ranges"] = "bytes"
            return response
    attachment = not entry.path.endswith((".md", ".png", ".svg", ".json"))
    if stored and settings.REALICU_OBJECT_STORAGE_REDIRECT:
        response = HttpResponseRedirect(path.url())
        response["ETag"] = etag
        return response
    if stored:
        response = StreamingHttpResponse(path.chunks(), content_type=content_type)
        response["Content-Length"] = str(size)
        response["Content-Disposition"] = content_disposition_header(
            attachment, path.name
        )
    else:
        response = FileResponse(
            open(path, "rb"),
            as_attachment=attachment,
            filename=path.name,
            content_type=content_type,
        )
    response["ETag"] = etag
    response["Accept-Ranges"] = "bytes"
    return response
