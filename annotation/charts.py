"""Geometry of the small server-rendered SVG charts of the admin pages (bars
with confidence intervals, a line plot): numbers only, drawn by templates, so
the pages need no chart script and every label stays escaped."""

from __future__ import annotations

import math

BAR_WIDTH = 360  # px of the value axis
BAR_HEIGHT = 18
BAR_GAP = 8
LABEL_WIDTH = 190


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def ci_bars(items: list[dict], *, low: float = 0.0, high: float = 1.0) -> dict:
    """Horizontal bars for ``items`` ``[{"label", "estimate", "low", "high"}]``
    on the axis ``low..high`` (widened to hold a negative estimate or bound,
    as a kappa can be), each with its CI as a whisker. Undefined values (nan)
    get no bar and are shown as n/a."""
    values = [
        v for item in items for v in (item["estimate"], item["low"], item["high"])
    ]
    finite = [v for v in values if _finite(v)]
    low = min([low, *finite])
    high = max([high, *finite])
    span = (high - low) or 1.0

    def x(value: float) -> float:
        return LABEL_WIDTH + (value - low) / span * BAR_WIDTH

    rows = []
    for n, item in enumerate(items):
        y = BAR_GAP + n * (BAR_HEIGHT + BAR_GAP)
        estimate = item["estimate"]
        row = {"label": item["label"], "y": y, "text_y": y + BAR_HEIGHT * 0.75,
               "mid_y": y + BAR_HEIGHT / 2, "defined": _finite(estimate)}
        if row["defined"]:
            start, end = sorted((x(max(low, 0.0) if low < 0 else low), x(estimate)))
            row.update(bar_x=start, bar_width=max(end - start, 1.0),
                       value=f"{estimate:.2f}", value_x=LABEL_WIDTH + BAR_WIDTH + 8)
            if _finite(item["low"]) and _finite(item["high"]):
                row.update(ci=True, ci_x1=x(item["low"]), ci_x2=x(item["high"]),
                           value=f"{estimate:.2f} [{item['low']:.2f}, "
                           f"{item['high']:.2f}]")
        else:
            row.update(value="n/a", value_x=LABEL_WIDTH + BAR_WIDTH + 8)
        rows.append(row)
    ticks = []
    step = 0.25 if span <= 1.5 else 0.5
    tick = math.ceil(low / step) * step
    while tick <= high + 1e-9:
        ticks.append({"x": x(tick), "label": f"{tick:g}"})
        tick += step
    height = BAR_GAP + len(items) * (BAR_HEIGHT + BAR_GAP) + 16
    return {
        "rows": rows,
        "ticks": ticks,
        "zero_x": x(0.0) if low < 0 < high else None,
        "width": LABEL_WIDTH + BAR_WIDTH + 170,
        "height": height,
        "axis_y": height - 14,
        "axis_x1": LABEL_WIDTH,
        "axis_x2": LABEL_WIDTH + BAR_WIDTH,
    }


PLOT_WIDTH = 520
PLOT_HEIGHT = 260
PLOT_LEFT = 44
PLOT_BOTTOM = 30
PLOT_TOP = 12


def line_plot(
    xs: list[float], series: list[dict], *, markers: list[dict] | None = None
) -> dict:
    """A plot of ``series`` ``[{"name", "values", "css"}]`` against ``xs`` on a
    0..1 value axis; ``markers`` ``[{"x", "label", "css"}]`` are vertical lines
    (the current and the best tau). Undefined values break the line."""
    x_low, x_high = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x_span = (x_high - x_low) or 1.0
    inner_w = PLOT_WIDTH - PLOT_LEFT - 12
    inner_h = PLOT_HEIGHT - PLOT_TOP - PLOT_BOTTOM

    def px(value: float) -> float:
        return PLOT_LEFT + (value - x_low) / x_span * inner_w

    def py(value: float) -> float:
        return PLOT_TOP + (1.0 - value) * inner_h

    lines = []
    for entry in series:
        segments, current = [], []
        for xv, yv in zip(xs, entry["values"]):
            if _finite(yv):
                current.append(f"{px(xv):.1f},{py(yv):.1f}")
            elif current:
                segments.append(" ".join(current))
                current = []
        if current:
            segments.append(" ".join(current))
        lines.append({**entry, "segments": segments,
                      "points": [{"x": px(xv), "y": py(yv)}
                                 for xv, yv in zip(xs, entry["values"]) if _finite(yv)]})
    return {
        "width": PLOT_WIDTH,
        "height": PLOT_HEIGHT,
        "left": PLOT_LEFT,
        "right": PLOT_WIDTH - 12,
        "top": PLOT_TOP,
        "bottom": PLOT_HEIGHT - PLOT_BOTTOM,
        "lines": lines,
        "x_ticks": [{"x": px(v), "label": f"{v:g}"} for v in xs],
        "y_ticks": [{"y": py(v), "label": f"{v:g}"} for v in (0, 0.25, 0.5, 0.75, 1)],
        "markers": [
            {**m, "px": px(m["x"])}
            for m in (markers or [])
            if _finite(m.get("x")) and x_low <= m["x"] <= x_high
        ],
    }
