/* The charts of the admin pages (IRR dashboard, calibration report, Oracle
   validation), drawn with uPlot (vendored) from the JSON that the server writes
   with json_script: each [data-chart] figure names the id of its
   <script type="application/json"> and holds a [data-chart-canvas] to draw in.
   Two kinds of chart:
   - "bars": horizontal bars, one row per item {label, estimate, low, high}, the
     95 % CI (low..high) as a whisker; a null estimate is n/a and gets no bar.
     The value axis is 0..1, widened to hold a negative figure (a kappa can be);
   - "lines": series {name, values} against x, with vertical markers {x, label}
     (the current and the best tau); a null value breaks its line.
   The figures stay on the page as text (tables and value lists): the canvas is
   a picture of them. Drawn on load and in content htmx swaps in. */
(function () {
  "use strict";

  if (typeof window.uPlot === "undefined") return;

  const C = {
    ink: "#1c2630",
    muted: "#5c6b78",
    grid: "#e6eaee",
    axis: "#b7c0c9",
    bar: "#9cc0e2",
    barEdge: "#5f8fba",
  };
  const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';
  // Accuracy, precision, recall, F1 (the series order of the calibration sweep).
  const PALETTE = ["#5c6b78", "#1f5f99", "#c05a00", "#1e6b3a", "#7a3e9d"];
  const MARKERS = ["#5c6b78", "#1e6b3a", "#a4262c"];
  const MAX_WIDTH = 560;

  function finite(value) {
    return typeof value === "number" && isFinite(value);
  }

  function fmt(value) {
    return finite(value) ? String(Math.round(value * 1000) / 1000) : "";
  }

  function pxRatio() {
    return window.devicePixelRatio || 1;
  }

  function axis(side, extra) {
    return Object.assign(
      {
        side: side,
        stroke: C.muted,
        font: FONT,
        ticks: { stroke: C.axis, width: 1, size: 3 },
        grid: { stroke: C.grid, width: 1 },
      },
      extra
    );
  }

  function labelWidth(labels) {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = FONT;
    return Math.ceil(
      labels.reduce(function (widest, label) {
        return Math.max(widest, ctx.measureText(label).width);
      }, 0)
    );
  }

  // Horizontal bars with CI whiskers --------------------------------------

  function barsChart(spec, width) {
    const items = spec.bars || [];
    const labels = items.map(function (item) {
      return item.label;
    });
    const figures = [];
    items.forEach(function (item) {
      [item.estimate, item.low, item.high].forEach(function (v) {
        if (finite(v)) figures.push(v);
      });
    });
    const low = Math.min.apply(null, [0].concat(figures));
    const high = Math.max.apply(null, [1].concat(figures));
    const indices = items.map(function (_, i) {
      return i;
    });

    function whiskers(u) {
      const ctx = u.ctx;
      const r = pxRatio();
      const cap = 5 * r;
      ctx.save();
      ctx.strokeStyle = C.ink;
      ctx.lineWidth = 1.5 * r;
      ctx.beginPath();
      items.forEach(function (item, i) {
        if (!finite(item.estimate) || !finite(item.low) || !finite(item.high)) return;
        const y = u.valToPos(i, "x", true);
        const x1 = u.valToPos(item.low, "y", true);
        const x2 = u.valToPos(item.high, "y", true);
        ctx.moveTo(x1, y);
        ctx.lineTo(x2, y);
        ctx.moveTo(x1, y - cap);
        ctx.lineTo(x1, y + cap);
        ctx.moveTo(x2, y - cap);
        ctx.lineTo(x2, y + cap);
      });
      ctx.stroke();
      if (low < 0) {
        // Zero, where a negative bar starts.
        const x0 = u.valToPos(0, "y", true);
        ctx.strokeStyle = C.muted;
        ctx.lineWidth = r;
        ctx.setLineDash([3 * r, 2 * r]);
        ctx.beginPath();
        ctx.moveTo(x0, u.bbox.top);
        ctx.lineTo(x0, u.bbox.top + u.bbox.height);
        ctx.stroke();
      }
      ctx.restore();
    }

    const options = {
      width: width,
      height: 28 * items.length + 40,
      padding: [6, 16, 0, 0],
      legend: { show: false },
      cursor: { show: false },
      scales: {
        x: { time: false, ori: 1, dir: -1, range: [-0.5, items.length - 0.5] },
        y: { ori: 0, range: [low, high] },
      },
      axes: [
        axis(3, {
          splits: function () {
            return indices;
          },
          values: function (u, splits) {
            return splits.map(function (i) {
              return labels[i] === undefined ? "" : labels[i];
            });
          },
          grid: { show: false },
          size: labelWidth(labels) + 16,
        }),
        axis(2, {
          size: 30,
          values: function (u, splits) {
            return splits.map(fmt);
          },
        }),
      ],
      series: [
        {},
        {
          label: spec.title || "Estimate",
          fill: C.bar,
          stroke: C.barEdge,
          width: 1,
          fillTo: 0,
          points: { show: false },
          // [share of a row, widest, narrowest] in px: one bar alone keeps its width.
          paths: uPlot.paths.bars({ size: [0.64, 20, 14] }),
        },
      ],
      hooks: { draw: [whiskers] },
    };
    const data = [
      indices,
      items.map(function (item) {
        return finite(item.estimate) ? item.estimate : null;
      }),
    ];
    return [options, data];
  }

  // Lines against x, with markers ------------------------------------------

  function linesChart(spec, width) {
    const xs = spec.x || [];
    const markers = (spec.markers || []).filter(function (m) {
      return finite(m.x);
    });

    function drawMarkers(u) {
      const ctx = u.ctx;
      const r = pxRatio();
      const top = u.bbox.top;
      const bottom = top + u.bbox.height;
      ctx.save();
      ctx.font = FONT.replace("11px", 11 * r + "px");
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      markers.forEach(function (m, i) {
        const x = u.valToPos(m.x, "x", true);
        if (x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) return;
        const color = MARKERS[i % MARKERS.length];
        ctx.strokeStyle = color;
        ctx.fillStyle = color;
        ctx.lineWidth = 1.5 * r;
        ctx.setLineDash([4 * r, 3 * r]);
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, bottom);
        ctx.stroke();
        ctx.fillText(m.label, x, top + 2 * r + i * 13 * r);
      });
      ctx.restore();
    }

    const options = {
      width: width,
      height: 260,
      padding: [8, 16, 0, 0],
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      scales: {
        x: { time: false },
        y: { range: spec.y_range || [0, 1] },
      },
      axes: [
        axis(2, {
          label: spec.x_label || "",
          labelFont: FONT,
          labelSize: 14,
          size: 30,
          splits: xs.length <= 12 ? function () { return xs; } : undefined,
          values: function (u, splits) {
            return splits.map(fmt);
          },
        }),
        axis(3, {
          values: function (u, splits) {
            return splits.map(fmt);
          },
        }),
      ],
      series: [{ label: spec.x_label || "x", value: function (u, v) { return fmt(v); } }].concat(
        (spec.series || []).map(function (s, i) {
          return {
            label: s.name,
            stroke: PALETTE[i % PALETTE.length],
            width: 2,
            points: { show: true, size: 5, fill: PALETTE[i % PALETTE.length] },
            // Blank until the cursor is on a tau; n/a where a figure is undefined.
            value: function (u, v, seriesIdx, idx) {
              if (idx === null || idx === undefined) return "";
              return v === null || v === undefined ? "n/a" : fmt(v);
            },
          };
        })
      ),
      hooks: { draw: [drawMarkers] },
    };
    const data = [xs].concat(
      (spec.series || []).map(function (s) {
        return s.values.map(function (v) {
          return finite(v) ? v : null;
        });
      })
    );
    return [options, data];
  }

  const KINDS = { bars: barsChart, lines: linesChart };

  function draw(figure) {
    if (figure.dataset.chartDrawn) return;
    const source = document.getElementById(figure.dataset.chart);
    const target = figure.querySelector("[data-chart-canvas]");
    if (!source || !target) return;
    const spec = JSON.parse(source.textContent);
    const build = KINDS[spec.kind];
    if (!build) return;
    const width = Math.min(MAX_WIDTH, Math.max(280, target.clientWidth || MAX_WIDTH));
    const built = build(spec, width);
    figure.dataset.chartDrawn = "true";
    new uPlot(built[0], built[1], target);
  }

  function drawIn(root) {
    if (root.matches && root.matches("[data-chart]")) draw(root);
    root.querySelectorAll("[data-chart]").forEach(draw);
  }

  drawIn(document);
  document.addEventListener("htmx:load", function (event) {
    drawIn(event.detail.elt);
  });
})();
