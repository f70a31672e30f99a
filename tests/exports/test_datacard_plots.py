"""The data card's SVG plots: well-formed SVG, bars as long as their counts,
histogram bins that hold every value, escaped text, the same bytes for the same
input, and a release whose plots are served as images without matplotlib."""

import sys
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from exports.svgplots import (
    bars_svg,
    grouped_bars_svg,
    histogram_bins,
    histogram_svg,
)

SVG = "{http://www.w3.org/2000/svg}"


def _bars(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [
        r for r in root.iter(f"{SVG}rect") if r.get("fill") not in ("#ffffff", "none")
    ]


def test_bar_lengths_are_proportional_to_the_counts_and_labelled():
    svg = bars_svg(["Sepsis", "Cardiovascular"], [40, 10], "Stays", "stays")
    first, second = _bars(svg)
    assert float(first.get("width")) == pytest.approx(4 * float(second.get("width")))
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "Sepsis" in texts and "Cardiovascular" in texts and "40" in texts


def test_text_is_escaped_so_a_label_cannot_inject_markup():
    svg = bars_svg(['<script>alert("x")</script> & co'], [1], "A <b>", "n")
    assert "<script>" not in svg and "<b>" not in svg
    root = ET.fromstring(svg)
    assert not list(root.iter(f"{SVG}script"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert '<script>alert("x")</script> & co' in texts


def test_histogram_bins_hold_every_value_the_maximum_in_the_last_bin():
    edges, counts = histogram_bins([0.0, 0.2, 2.5, 10.0], bins=20)
    assert len(edges) == 21 and edges[0] == 0.0 and edges[-1] == pytest.approx(10.0)
    assert sum(counts) == 4 and counts[-1] == 1 and counts[0] == 2
    # One value alone: a bin around it, as matplotlib's hist does.
    edges, counts = histogram_bins([5.0])
    assert edges[0] == 4.5 and edges[-1] == pytest.approx(5.5) and sum(counts) == 1
    svg = histogram_svg([1.0, 2.0, 2.0], "ICU stay length", "hours", "stays")
    assert len(_bars(svg)) == 20


def test_grouped_bars_draw_one_bar_per_group_and_value_with_a_legend():
    svg = grouped_bars_svg(
        {"Acute problems": Counter({0: 1, 2: 3}), "Red flags": Counter({1: 2})},
        "Items per window",
        "items per window",
        "windows",
    )
    # 3 x values (0, 1, 2) times 2 groups, plus the 2 legend swatches.
    assert len(_bars(svg)) == 8
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "Acute problems" in texts and "Red flags" in texts


def test_the_same_input_gives_the_same_bytes():
    args = (["a", "b"], [3, 1], "t", "x")
    assert bars_svg(*args) == bars_svg(*args)
    assert histogram_svg([1, 2, 3], "t", "x", "y") == histogram_svg(
        [1, 2, 3], "t", "x", "y"
    )


@pytest.mark.django_db
def test_a_release_plot_is_served_as_an_svg_image(tiny_release, admin_user, client):
    client.force_login(admin_user)
    response = client.get(f"/releases/{tiny_release.pk}/files/plots/status.svg")
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"] == "image/svg+xml"
    svg = b"".join(response.streaming_content).decode()
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "Patient status labels" in texts and "stable" in texts


@pytest.mark.django_db
def test_a_release_builds_without_matplotlib(monkeypatch, admin_user, tiny_run):
    from exports.building import release_build
    from exports.models import ReleaseKind, ReleaseState
    from exports.services import release_create

    # None in sys.modules makes any import of it raise ImportError.
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    release = release_build(
        release=release_create(
            user=admin_user, kind=ReleaseKind.SCALE, oracle_run=tiny_run
        )
    )
    assert release.state == ReleaseState.READY, release.error
