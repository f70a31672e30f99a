"""Pages, htmx partials and the tracks JSON are gzip-compressed for a client
that accepts it (GZipMiddleware, issue 20), and the tracks JSON's ETag still
gets a 304 when the compressed response's weak ETag comes back."""

import gzip
import json

import pytest

from tests.windows.window_pages import (
    _stay_with_tracks,
    event_row,
    tracks_url,
    window_url,
)

pytestmark = pytest.mark.django_db


def _gzipped(response) -> bytes:
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    return gzip.decompress(response.content)


def test_tracks_json_is_compressed_and_says_what_the_plain_one_says(signed_in):
    stay = _stay_with_tracks()
    plain = signed_in.get(tracks_url(stay, window=2))
    assert plain.status_code == 200 and not plain.has_header("Content-Encoding")
    packed = signed_in.get(tracks_url(stay, window=2), HTTP_ACCEPT_ENCODING="gzip")
    assert packed.status_code == 200
    assert json.loads(_gzipped(packed)) == json.loads(plain.content)
    assert len(packed.content) < len(plain.content) / 3


def test_the_weak_etag_of_a_compressed_response_gets_a_304(signed_in):
    stay = _stay_with_tracks()
    url = tracks_url(stay, window=2, sources=1)
    first = signed_in.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    etag = first["ETag"]
    # GZipMiddleware weakens the view's strong ETag: the bytes differ.
    assert etag.startswith('W/"') and first["Content-Encoding"] == "gzip"
    again = signed_in.get(
        url, HTTP_ACCEPT_ENCODING="gzip, deflate, br", HTTP_IF_NONE_MATCH=etag
    )
    assert again.status_code == 304 and again.content == b""
    # A client that later stops accepting gzip still revalidates its copy.
    plain = signed_in.get(url, HTTP_IF_NONE_MATCH=etag)
    assert plain.status_code == 304
    # Another window is another document: the old ETag does not match it.
    other = signed_in.get(
        tracks_url(stay, window=3, sources=1),
        HTTP_ACCEPT_ENCODING="gzip",
        HTTP_IF_NONE_MATCH=etag,
    )
    assert other.status_code == 200 and other["ETag"] != etag


def test_window_page_and_its_htmx_partial_are_compressed(
    signed_in,
    stay_with_events,  # noqa: F811
):
    stay, _, events = stay_with_events
    page = signed_in.get(window_url(stay, 5), HTTP_ACCEPT_ENCODING="gzip")
    assert page.status_code == 200
    html = _gzipped(page).decode()
    assert "<html" in html and event_row(html, events["in_window"]) is not None
    partial = signed_in.get(
        window_url(stay, 5, scope="stay"),
        HTTP_ACCEPT_ENCODING="gzip",
        HTTP_HX_REQUEST="true",
    )
    assert partial.status_code == 200
    fragment = _gzipped(partial).decode()
    assert fragment.lstrip().startswith('<section id="window-events"')
    assert event_row(fragment, events["after"]) is not None
    assert "HX-Request" in partial["Vary"]
