"""The data card's plots as SVG text: horizontal bars, a histogram and grouped
bars, written directly rather than through matplotlib, whose import and layout
cost more than the rest of a small release's build (issue 20). The same input
gives the same bytes, so a rebuild's plots are identical."""

from __future__ import annotations

import math
from html import escape

BAR_COLOR = "#3b6ea5"
# One colour per group of a grouped bar plot, in order (matplotlib's first three).
GROUP_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
WIDTH = 700
# The frame (left, top, right, bottom) of a plot of vertical bars.
COLUMN_BOX = (60, 40, WIDTH - 20, 300)
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'
CHAR_PX = 6.6  # mean advance of a 12 px sans-serif character, for label widths


def _num(value: float) -> str:
    """A coordinate with at most one decimal and no trailing zeros."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _tick_step(largest: float, most: int = 6) -> float:
    """A round step (1, 2 or 5 times a power of ten, at least 1: the axes count
    stays or windows) that puts at most ``most`` ticks between 0 and
    ``largest``."""
    if largest <= most:
        return 1.0
    raw = largest / most
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return factor * power
    return 10 * power


def _tick_label(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def _document(height: float, body: list[str], title: str) -> str:
    return "\n".join(
        [
            '<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{WIDTH}" height="{_num(height)}" '
            f'viewBox="0 0 {WIDTH} {_num(height)}" role="img" {FONT} '
            'font-size="12">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{WIDTH}" height="{_num(height)}" fill="#ffffff"/>',
            f'<text x="{WIDTH / 2:g}" y="22" text-anchor="middle" '
            f'font-size="14">{escape(title)}</text>',
            *body,
            "</svg>",
            "",
        ]
    )


def _ticks(largest: float) -> tuple[list[float], float]:
    """The tick values of a value axis that reaches ``largest``, and the
    axis' maximum."""
    step = _tick_step(largest)
    maximum = max(step, math.ceil(largest / step) * step)
    return [n * step for n in range(round(maximum / step) + 1)], maximum


def _value_axis(
    *,
    left: float,
    right: float,
    bottom: float,
    top: float,
    largest: float,
    horizontal: bool,
) -> tuple[list[str], float]:
    """Grid lines with tick labels along a value axis, horizontal (vertical
    lines, labels under the frame) or vertical (horizontal lines, labels to
    its left); the axis' maximum."""
    values, maximum = _ticks(largest)
    parts = []
    for value in values:
        if horizontal:
            x = left + (right - left) * value / maximum
            ends, label = (x, top, x, bottom), (x, bottom + 15, "middle")
        else:
            y = bottom - (bottom - top) * value / maximum
            ends, label = (left, y, right, y), (left - 6, y + 4, "end")
        x1, y1, x2, y2 = (_num(v) for v in ends)
        parts.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#e0e0e0"/>'
        )
        parts.append(
            f'<text x="{_num(label[0])}" y="{_num(label[1])}" '
            f'text-anchor="{label[2]}">{_tick_label(value)}</text>'
        )
    return parts, maximum


def _axes_frame(left: float, top: float, right: float, bottom: float) -> str:
    return (
        f'<rect x="{_num(left)}" y="{_num(top)}" width="{_num(right - left)}" '
        f'height="{_num(bottom - top)}" fill="none" stroke="#333333"/>'
    )


def _framed(
    body: list[str],
    box: tuple[float, float, float, float],
    title: str,
    xlabel: str,
    ylabel: str = "",
) -> str:
    """The plot's document: its body in the frame ``box`` (left, top, right,
    bottom), the x axis's label under it and the y axis's, if any, turned
    along its left side."""
    left, top, right, bottom = box
    body.append(_axes_frame(left, top, right, bottom))
    body.append(
        f'<text x="{_num((left + right) / 2)}" y="{_num(bottom + 34)}" '
        f'text-anchor="middle">{escape(xlabel)}</text>'
    )
    if ylabel:
        middle = _num((top + bottom) / 2)
        body.append(
            f'<text x="16" y="{middle}" text-anchor="middle" '
            f'transform="rotate(-90 16 {middle})">{escape(ylabel)}</text>'
        )
    return _document(bottom + 46, body, title)


def bars_svg(labels: list[str], values: list[float], title: str, xlabel: str) -> str:
    """Horizontal bars, the first label at the top, each bar's value at its end."""
    row = 24
    longest = max((len(label) for label in labels), default=0)
    left = min(WIDTH / 2, 16 + CHAR_PX * longest)
    right, top = WIDTH - 40, 40
    bottom = top + row * max(1, len(labels)) + 8
    largest = max(values, default=0)
    body, maximum = _value_axis(
        left=left, right=right, bottom=bottom, top=top, largest=largest, horizontal=True
    )
    for n, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = top + 4 + n * row
        width = (right - left) * value / maximum
        body.append(
            f'<rect x="{_num(left)}" y="{_num(y + 3)}" width="{_num(width)}" '
            f'height="{row - 6}" fill="{BAR_COLOR}"/>'
        )
        body.append(
            f'<text x="{_num(left - 6)}" y="{_num(y + row / 2 + 4)}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
        body.append(
            f'<text x="{_num(left + width + 4)}" y="{_num(y + row / 2 + 4)}">'
            f"{_tick_label(value)}</text>"
        )
    return _framed(body, (left, top, right, bottom), title, xlabel)


def histogram_bins(values: list[float], bins: int = 20) -> tuple[list[float], list]:
    """``bins`` equal bins over the values' range (a range of one around a single
    value): the bin edges and the count in each, the last bin closed."""
    if not values:
        values = [0.0]
    low, high = min(values), max(values)
    if low == high:
        low, high = low - 0.5, high + 0.5
    width = (high - low) / bins
    edges = [low + n * width for n in range(bins + 1)]
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, int((value - low) / width))] += 1
    return edges, counts


def _column_axis(largest: float) -> tuple[list[str], float]:
    """The value axis of a plot of vertical bars in COLUMN_BOX: horizontal grid
    lines, labels to their left; the axis' maximum."""
    left, top, right, bottom = COLUMN_BOX
    return _value_axis(
        left=left,
        right=right,
        bottom=bottom,
        top=top,
        largest=largest,
        horizontal=False,
    )


def histogram_svg(values: list[float], title: str, xlabel: str, ylabel: str) -> str:
    edges, counts = histogram_bins(values)
    left, top, right, bottom = COLUMN_BOX
    body, maximum = _column_axis(max(counts))
    span = (right - left) / len(counts)
    for n, count in enumerate(counts):
        height = (bottom - top) * count / maximum
        body.append(
            f'<rect x="{_num(left + n * span)}" y="{_num(bottom - height)}" '
            f'width="{_num(span)}" height="{_num(height)}" fill="{BAR_COLOR}" '
            'stroke="#ffffff" stroke-width="0.5"/>'
        )
    for n in range(0, len(edges), 4):
        x = left + n * span
        body.append(
            f'<text x="{_num(x)}" y="{_num(bottom + 15)}" text-anchor="middle">'
            f"{edges[n]:.1f}</text>"
        )
    return _framed(body, (left, top, right, bottom), title, xlabel, ylabel)


def grouped_bars_svg(
    groups: dict[str, dict[int, int]], title: str, xlabel: str, ylabel: str
) -> str:
    """Vertical bars for x = 0..largest key, one bar per group side by side, with
    a legend naming the groups."""
    largest_x = max((max(c, default=0) for c in groups.values()), default=0)
    xs = list(range(largest_x + 1))
    left, top, right, bottom = COLUMN_BOX
    largest = max((max(c.values(), default=0) for c in groups.values()), default=0)
    body, maximum = _column_axis(largest)
    slot = (right - left) / len(xs)
    width = 0.8 * slot / max(1, len(groups))
    for n, (name, counter) in enumerate(groups.items()):
        color = GROUP_COLORS[n % len(GROUP_COLORS)]
        for x in xs:
            height = (bottom - top) * counter.get(x, 0) / maximum
            body.append(
                f'<rect x="{_num(left + x * slot + 0.1 * slot + n * width)}" '
                f'y="{_num(bottom - height)}" width="{_num(width)}" '
                f'height="{_num(height)}" fill="{color}"/>'
            )
        legend_y = top + 14 + 18 * n
        body.append(
            f'<rect x="{_num(right - 170)}" y="{_num(legend_y - 10)}" width="12" '
            f'height="12" fill="{color}"/>'
        )
        body.append(
            f'<text x="{_num(right - 152)}" y="{_num(legend_y)}">{escape(name)}</text>'
        )
    for x in xs:
        body.append(
            f'<text x="{_num(left + (x + 0.5) * slot)}" y="{_num(bottom + 15)}" '
            f'text-anchor="middle">{x}</text>'
        )
    return _framed(body, (left, top, right, bottom), title, xlabel, ylabel)
