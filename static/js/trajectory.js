/* Trajectory plots of an ICU stay, drawn with uPlot from one JSON document
   (the [data-tracks-url] of the [data-trajectory] element):
   - [data-overview]: the status tracks of the whole stay on one screen, with the
     Gold windows marked (each mark opens its window), the current window and the
     bedside boundary (its end);
   - [data-plots] (window page only): vitals, labs and organ support around the
     window, the range set by [data-range] buttons ("z" cycles them).
   Hours on the x axis count from ICU admission; a value at hour H covers
   (H - 1 h, H]. Each track's y axis shows at least its MIN_SPAN (SpO2
   85-100 %, ...) and widens for values outside it.
   On a page that cites evidence ([data-cite-points], the annotation page) the
   JSON carries the event behind each point (?sources=1): a click on a point,
   or Enter / "e" on a focused plot (Tab to it; Left/Right move along the hours,
   Up/Down between its series), announces that event with a "trajectory:cite"
   event on the document ({eventId, label}); annotate.js attaches it. */
(function () {
  "use strict";

  const root = document.querySelector("[data-trajectory]");
  if (!root || typeof window.uPlot === "undefined") return;

  const C = {
    ink: "#1c2630",
    muted: "#5c6b78",
    grid: "#e6eaee",
    axis: "#b7c0c9",
    accent: "#1f5f99",
    gold: "#b8860b",
    goldFill: "rgba(201, 154, 6, 0.20)",
    currentFill: "rgba(31, 95, 153, 0.22)",
    hindsight: "rgba(92, 107, 120, 0.08)",
    bedside: "#a4262c",
  };
  const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';
  const VENT_SHORT = {
    none: "None",
    supplemental_o2: "O₂",
    hfnc: "HFNC",
    niv: "NIV",
    invasive: "IMV",
  };
  const citePoints = Boolean(document.querySelector("[data-cite-points]"));
  const CITE_REACH_PX = 16; // how far from a point a click still means it
  const AXIS_LEFT = 50; // fixed y-axis widths keep the plots' x positions aligned
  const AXIS_RIGHT = 42;

  // The smallest y span each track's plot shows, [low, high] in the track's
  // unit: the axis widens to show any value outside it, but never narrows
  // below it, so that the noise of a steady value (SpO2 between 99.8 and 100)
  // is not stretched to the plot's full height and read as a swing. The spans
  // are the scales a bedside monitor or flowsheet shows a clinician by default:
  // the normal range with the usual alarm and treatment thresholds inside it.
  // Thresholds kept in view, by source: SOFA's cut-offs (CLINICAL_CONCEPTS.md
  // 9b: MAP 70 mmHg, P/F 400/300/200/100 mmHg, platelets 150/100 x10^3/uL,
  // bilirubin 1.2/2.0 mg/dL, creatinine 1.2/2.0 mg/dL, norepinephrine
  // 0.1 mcg/kg/min), KDIGO's urine rates (4c: 0.5 and 0.3 mL/kg/h), Sepsis-3's
  // SOFA rise of 2 (10c); the others are monitor defaults (SpO2 alarm near
  // 88-90 %, fever 38.3 degC, lactate 2 and 4 mmol/L, arterial pH 7.35-7.45).
  const MIN_SPAN = {
    spo2: [85, 100],
    hr: [50, 120],
    sbp: [90, 160],
    map: [60, 110],
    dbp: [40, 90],
    rr: [8, 30],
    temp: [35.5, 38.5],
    gcs: [3, 15],
    rass: [-5, 4],
    lactate: [0, 4],
    creatinine: [0, 2.5],
    platelets: [0, 200],
    bilirubin: [0, 2.5],
    ph: [7.2, 7.5],
    pf_ratio: [0, 450],
    fio2: [0.21, 1],
    sofa: [0, 6],
    ned: [0, 0.15],
    urine_ml_kg_h: [0, 1.5],
  };

  // The overview strip: status-relevant tracks, one row each.
  const OVERVIEW = [
    { label: "SOFA", unit: "", series: [{ key: "sofa", color: "#7a3e9d", step: true }], min: 0 },
    { label: "NE-equiv.", unit: "mcg/kg/min", series: [{ key: "ned", color: "#c0392b", step: true, fill: true }], min: 0 },
    { label: "Ventilation", unit: "", levels: true, series: [{ key: "ventilation", color: "#2a6f97", step: true, fill: true }] },
    { label: "AKI stage", unit: "KDIGO", series: [{ key: "aki_stage", color: "#b5651d", step: true, fill: true }], min: 0, max: 3, ticks: [0, 1, 2, 3] },
    { label: "Lactate", unit: "mmol/L", series: [{ key: "lactate", color: "#8a6d00", step: true }], min: 0 },
    { label: "MAP", unit: "mmHg", series: [{ key: "map", color: "#16407a" }] },
  ];

  // The window page's plots, in groups.
  const DETAIL = [
    {
      group: "Vitals",
      plots: [
        {
          title: "Heart rate and blood pressure",
          unit: "bpm, mmHg",
          series: [
            { key: "hr", label: "HR", color: "#c0392b" },
            { key: "sbp", label: "SBP", color: "#6b93c4" },
            { key: "map", label: "MAP", color: "#16407a", width: 2 },
            { key: "dbp", label: "DBP", color: "#9bb7d8" },
          ],
        },
        {
          title: "SpO₂ and respiratory rate",
          unit: "%, /min",
          series: [
            { key: "spo2", label: "SpO₂ %", color: "#2a8c82" },
            { key: "rr", label: "RR /min", color: "#8e6bbf", scale: "right" },
          ],
        },
        { title: "Temperature", unit: "°C", series: [{ key: "temp", label: "Temp °C", color: "#d08a4a" }] },
        {
          title: "GCS and RASS",
          unit: "",
          series: [
            { key: "gcs", label: "GCS", color: "#34495e", step: true },
            { key: "rass", label: "RASS", color: "#9c640c", step: true, scale: "right", min: -5, max: 4 },
          ],
          min: 3,
          max: 15,
        },
      ],
    },
    {
      group: "Labs",
      plots: [
        { title: "Lactate", unit: "mmol/L", series: [{ key: "lactate", label: "Lactate", color: "#8a6d00", step: true }], min: 0 },
        { title: "Creatinine", unit: "mg/dL", series: [{ key: "creatinine", label: "Creatinine", color: "#b5651d", step: true }], min: 0 },
        { title: "Platelets", unit: "10³/µL", series: [{ key: "platelets", label: "Platelets", color: "#7a3e9d", step: true }], min: 0 },
        { title: "Bilirubin", unit: "mg/dL", series: [{ key: "bilirubin", label: "Bilirubin", color: "#a0522d", step: true }], min: 0 },
        { title: "Arterial pH", unit: "", series: [{ key: "ph", label: "pH", color: "#2c3e50", step: true }] },
        {
          title: "PaO₂/FiO₂ and FiO₂",
          unit: "mmHg, fraction",
          series: [
            { key: "pf_ratio", label: "P/F", color: "#2a6f97", step: true },
            { key: "fio2", label: "FiO₂", color: "#5d8aa8", step: true, scale: "right", dash: [4, 3] },
          ],
          min: 0,
        },
      ],
    },
    {
      group: "Organ support and scores",
      plots: [
        { title: "SOFA total", unit: "", series: [{ key: "sofa", label: "SOFA", color: "#7a3e9d", step: true }], min: 0 },
        { title: "Vasopressors (norepinephrine equivalent)", unit: "mcg/kg/min", series: [{ key: "ned", label: "NE-eq.", color: "#c0392b", step: true, fill: true }], min: 0 },
        { title: "Ventilation status", unit: "", levels: true, series: [{ key: "ventilation", label: "Status", color: "#2a6f97", step: true, fill: true }] },
        { title: "AKI stage (KDIGO)", unit: "", series: [{ key: "aki_stage", label: "Stage", color: "#b5651d", step: true, fill: true }], min: 0, max: 3, ticks: [0, 1, 2, 3] },
        { title: "Urine output (6 h)", unit: "mL/kg/h", series: [{ key: "urine_ml_kg_h", label: "Urine", color: "#b59b00", step: true }], min: 0 },
        { title: "CRRT", unit: "", series: [{ key: "crrt_active", label: "CRRT", color: "#5c6b78", step: true, fill: true }], min: 0, max: 1, ticks: [0, 1] },
      ],
    },
  ];

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmtHours(h) {
    const sign = h < 0 ? "−" : "+";
    return sign + Math.abs(h).toFixed(Math.abs(h) < 10 && h % 1 ? 1 : 0) + " h";
  }

  function fmtValue(v) {
    if (v === null || v === undefined) return "–";
    const a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toFixed(3);
  }

  function windowUrl(index) {
    // The template renders the URL of window 0; other windows differ in the index.
    return root.dataset.windowUrl.replace(/\/0\/$/, "/" + index + "/");
  }

  // Window bands, the hindsight shade and the bedside line, drawn under and
  // over the series of every plot.
  function marks(data, gold) {
    const current = data.current;
    function band(u, from, to, fill, minPx) {
      const x0 = u.valToPos(from, "x", true);
      let x1 = u.valToPos(to, "x", true);
      const min = (minPx || 0) * devicePixelRatio;
      let left = x0;
      if (x1 - x0 < min) {
        left = (x0 + x1) / 2 - min / 2;
        x1 = left + min;
      }
      u.ctx.fillStyle = fill;
      u.ctx.fillRect(left, u.bbox.top, x1 - left, u.bbox.height);
    }
    return {
      hooks: {
        drawClear: [
          function (u) {
            const ctx = u.ctx;
            ctx.save();
            ctx.beginPath();
            ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
            ctx.clip();
            if (current) {
              band(u, current.end_h, u.scales.x.max, C.hindsight);
            }
            if (gold) {
              data.windows.forEach(function (w) {
                if (w.gold && (!current || w.index !== current.index)) {
                  band(u, w.start_h, w.end_h, C.goldFill, 3);
                }
              });
            }
            if (current) band(u, current.start_h, current.end_h, C.currentFill, 3);
            ctx.restore();
          },
        ],
        draw: [
          function (u) {
            if (!current) return;
            const ctx = u.ctx;
            const x = Math.round(u.valToPos(current.end_h, "x", true)) + 0.5;
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
            ctx.save();
            ctx.strokeStyle = C.bedside;
            ctx.lineWidth = 1.5 * devicePixelRatio;
            ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.restore();
          },
        ],
      },
    };
  }

  function yAxis(spec, side) {
    const axis = {
      scale: side === 1 ? "right" : "y",
      side: side,
      size: side === 1 ? AXIS_RIGHT : AXIS_LEFT,
      stroke: C.muted,
      font: FONT,
      gap: 3,
      space: spec.compact ? 12 : 24,
      ticks: { stroke: C.axis, width: 1, size: 3 },
      grid: { show: side !== 1, stroke: C.grid, width: 1 },
    };
    if (spec.compact) axis.font = '10px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';
    if (spec.levels && side !== 1) {
      axis.splits = function () {
        return [0, 1, 2, 3, 4];
      };
      axis.values = function (u, splits) {
        return splits.map(function (v) {
          return VENT_SHORT[u._levels[v]] || "";
        });
      };
    } else if (spec.ticks && side !== 1) {
      const ticks = spec.ticks;
      axis.splits = function () {
        return ticks;
      };
    }
    return axis;
  }

  function xAxis(show) {
    return {
      show: show,
      stroke: C.muted,
      font: FONT,
      size: show ? 28 : 0,
      gap: 2,
      ticks: { stroke: C.axis, width: 1, size: 3 },
      grid: { stroke: C.grid, width: 1 },
      values: function (u, splits) {
        return splits.map(function (h) {
          return h + " h";
        });
      },
    };
  }

  // The span a scale must show at least: its plot's min/max and the MIN_SPAN
  // of every track drawn on it (keys), or null when none sets one.
  function spanOf(keys, min, max) {
    let lo = min;
    let hi = max;
    keys.forEach(function (key) {
      const span = MIN_SPAN[key];
      if (!span) return;
      lo = lo === undefined ? span[0] : Math.min(lo, span[0]);
      hi = hi === undefined ? span[1] : Math.max(hi, span[1]);
    });
    return { lo: lo, hi: hi };
  }

  function yRange(spec, keys) {
    if (spec.levels) return [-0.3, 4.3];
    const span = spanOf(keys || [], spec.min, spec.max);
    return function (u, dataMin, dataMax) {
      let lo = dataMin;
      let hi = dataMax;
      if (lo === null || hi === null || lo === undefined) {
        lo = span.lo !== undefined ? span.lo : 0;
        hi = span.hi !== undefined ? span.hi : 1;
      }
      if (span.lo !== undefined) lo = Math.min(lo, span.lo);
      if (span.hi !== undefined) hi = Math.max(hi, span.hi);
      if (hi === lo) hi = lo + 1;
      // A little room at an end that a value reaches, more where the data
      // goes past the span (the span's own ends are round figures).
      const pad = (hi - lo) * 0.08;
      const low = span.lo !== undefined && lo >= span.lo ? lo - pad * 0.25 : lo - pad;
      const high = span.hi !== undefined && hi <= span.hi ? hi + pad * 0.25 : hi + pad;
      return [low, high];
    };
  }

  // The keys of the tracks a plot draws on one of its scales.
  function keysOn(spec, scale) {
    return spec.series
      .filter(function (s) {
        return (s.scale === "right" ? "right" : "y") === scale;
      })
      .map(function (s) {
        return s.key;
      });
  }

  // Vitals are hourly means: a line spans hours without charting up to
  // SPAN_HOURS (q4h temperatures), and breaks over longer gaps. Labs and
  // concept tracks already carry values forward, so their gaps are real.
  const SPAN_HOURS = 6;

  function spanShortGaps(maxGap) {
    return function (u, sidx, idx0, idx1, nullGaps) {
      const pxPerHour = Math.abs(u.valToPos(1, "x", true) - u.valToPos(0, "x", true));
      return nullGaps.filter(function (g) {
        return g[1] - g[0] > maxGap * pxPerHour;
      });
    };
  }

  // A value with no neighbour within maxGap hours has no line: draw it as a dot.
  function isolatedPoints(maxGap) {
    return function (u, sidx, show) {
      if (show) return null;
      const xs = u.data[0];
      const ys = u.data[sidx];
      const present = [];
      for (let i = 0; i < ys.length; i++) {
        if (ys[i] !== null && ys[i] !== undefined) present.push(i);
      }
      const lone = [];
      for (let k = 0; k < present.length; k++) {
        const i = present[k];
        const before = k > 0 ? xs[i] - xs[present[k - 1]] : Infinity;
        const after = k < present.length - 1 ? xs[present[k + 1]] - xs[i] : Infinity;
        if (before > maxGap && after > maxGap) lone.push(i);
      }
      return lone.length ? lone : null;
    };
  }

  function hasValues(data, spec) {
    return spec.series.some(function (s) {
      return (data.series[s.key] || []).some(function (v) {
        return v !== null && v !== undefined;
      });
    });
  }

  function seriesOptions(s) {
    const opts = {
      label: s.label || s.key,
      stroke: s.color,
      width: s.width || 1.5,
      scale: s.scale === "right" ? "right" : "y",
      spanGaps: false,
      // Steps hold a value: only a lone value needs a dot. Vitals keep uPlot's
      // choice (dots where they are far enough apart to read).
      points: { size: 4, fill: s.color, filter: isolatedPoints(s.step ? 1 : SPAN_HOURS) },
      value: function (u, v) {
        if (v === null || v === undefined) return "–";
        if (u._levels && s.key === "ventilation") return u._levels[v] || "–";
        return fmtValue(v);
      },
    };
    if (s.step) {
      opts.paths = uPlot.paths.stepped({ align: -1 });
      opts.points.show = false;
    }
    else opts.gaps = spanShortGaps(SPAN_HOURS);
    if (s.fill) opts.fill = s.color + "22";
    if (s.dash) opts.dash = s.dash;
    return opts;
  }

  function plotData(data, spec) {
    return [data.hours].concat(
      spec.series.map(function (s) {
        return data.series[s.key] || [];
      })
    );
  }

  // The y ranges drawn, on the plot's element (data-y-range, data-right-range:
  // "low high"), for the page's tests and anyone reading the DOM.
  function scaleMarks(target) {
    return {
      hooks: {
        setScale: [
          function (u, key) {
            if (key === "x") return;
            const scale = u.scales[key];
            if (scale.min === null || scale.max === null) return;
            target.dataset[key === "y" ? "yRange" : "rightRange"] =
              +scale.min.toFixed(3) + " " + +scale.max.toFixed(3);
          },
        ],
      },
    };
  }

  function makePlot(target, data, spec, o) {
    const right = spec.series.some(function (s) {
      return s.scale === "right";
    });
    const axes = [xAxis(o.xAxis), yAxis(spec, 3)];
    if (right) axes.push(yAxis(spec, 1));
    const scales = { x: { time: false }, y: { range: yRange(spec, keysOn(spec, "y")) } };
    const rightSeries = spec.series.find(function (s) {
      return s.scale === "right";
    });
    if (right) {
      scales.right = {
        range: yRange({ min: rightSeries.min, max: rightSeries.max }, keysOn(spec, "right")),
      };
    }
    const options = {
      width: Math.max(200, target.clientWidth),
      height: o.height,
      padding: [o.padTop || 6, right ? 0 : 12, 0, 0],
      legend: { show: o.legend, live: true },
      cursor: {
        sync: { key: o.syncKey, setSeries: false },
        drag: { x: o.zoom, y: false, setScale: o.zoom },
        points: { size: 5 },
      },
      scales: scales,
      axes: axes,
      series: [{ label: "Hour", value: function (u, h) { return h === null || h === undefined ? "–" : fmtHours(h); } }].concat(spec.series.map(seriesOptions)),
      plugins: [marks(data, o.gold), scaleMarks(target)],
      hooks: o.hooks || {},
    };
    const u = new uPlot(options, plotData(data, spec), target);
    u._levels = data.levels && data.levels.ventilation;
    return u;
  }

  // The overview strip -----------------------------------------------------

  function drawOverview(container, data) {
    const plots = [];
    const valueCells = [];
    const rows = el("div", "ov-rows");
    container.appendChild(rows);
    const readout = container.querySelector("[data-overview-readout]");
    OVERVIEW.forEach(function (base, i) {
      const spec = Object.assign({ compact: true }, base);
      const row = el("div", "ov-row");
      const label = el("div", "ov-label");
      label.appendChild(el("span", "ov-name", spec.label));
      if (spec.unit) label.appendChild(el("span", "ov-unit", spec.unit));
      const value = el("span", "ov-value", "");
      label.appendChild(value);
      valueCells.push(value);
      const cell = el("div", "ov-plot");
      row.appendChild(label);
      row.appendChild(cell);
      rows.appendChild(row);
      const last = i === OVERVIEW.length - 1;
      const plotHeight = spec.levels ? 58 : 40;
      const u = makePlot(cell, data, spec, {
        height: last ? plotHeight + 28 : plotHeight,
        xAxis: last,
        legend: false,
        syncKey: "overview",
        zoom: false,
        gold: true,
        padTop: 3,
        hooks: {
          setCursor: [
            function (u) {
              const idx = u.cursor.idx;
              if (idx === null || idx === undefined) {
                value.textContent = "";
                if (last && readout) readout.textContent = "";
                return;
              }
              const v = u.data[1][idx];
              value.textContent = spec.levels ? (VENT_SHORT[u._levels[v]] || "–") : fmtValue(v);
              if (last && readout) readout.textContent = "at " + fmtHours(u.data[0][idx]);
            },
          ],
        },
      });
      plots.push(u);
      u.over.addEventListener("click", function (event) {
        const w = goldAt(u, data, event.offsetX);
        if (w) window.location.assign(windowUrl(w.index));
      });
      u.over.addEventListener("mousemove", function (event) {
        u.over.style.cursor = goldAt(u, data, event.offsetX) ? "pointer" : "";
      });
    });

    // The window marks: a link for each Gold window (and the current one),
    // placed under the plots at its time.
    const lane = el("div", "ov-lane");
    lane.setAttribute("aria-label", "Gold windows");
    const laneLabel = el("div", "ov-label", "");
    laneLabel.appendChild(el("span", "ov-name", "Windows"));
    const laneCell = el("div", "ov-marks");
    lane.appendChild(laneLabel);
    lane.appendChild(laneCell);
    rows.appendChild(lane);
    const links = [];
    data.windows.forEach(function (w) {
      const isCurrent = data.current && w.index === data.current.index;
      if (!w.gold && !isCurrent) return;
      const a = el("a", "ov-mark" + (w.gold ? " is-gold" : "") + (isCurrent ? " is-current" : ""));
      a.href = windowUrl(w.index);
      a.title = "Window " + w.index + " · " + fmtHours(w.start_h) + (w.gold ? " · Gold" : "") + (isCurrent ? " · this window" : "") + " · action density " + w.density.toFixed(2);
      a.setAttribute("aria-label", a.title);
      a.textContent = w.index;
      a.dataset.windowIndex = w.index;
      laneCell.appendChild(a);
      links.push({ a: a, w: w });
    });
    function placeMarks() {
      // Marks that would overlap go to the next of up to three rows.
      const u = plots[plots.length - 1];
      const plotLeft = parseFloat(u.over.style.left) || 0;
      const rowEnds = [-Infinity, -Infinity, -Infinity];
      let rowsUsed = 1;
      links.forEach(function (link) {
        const mid = (link.w.start_h + link.w.end_h) / 2;
        const x = plotLeft + u.valToPos(mid, "x");
        const half = link.a.offsetWidth / 2 || 10;
        let row = rowEnds.findIndex(function (end) {
          return x - half > end + 2;
        });
        if (row < 0) row = rowEnds.length - 1;
        rowEnds[row] = x + half;
        rowsUsed = Math.max(rowsUsed, row + 1);
        link.a.style.left = x + "px";
        link.a.style.top = 3 + row * 19 + "px";
      });
      laneCell.style.height = 6 + rowsUsed * 19 + "px";
    }
    placeMarks();
    return { plots: plots, after: placeMarks };
  }

  function goldAt(u, data, offsetX) {
    const tolerance = 4; // px: a half-hour window is a hairline on a long stay
    let best = null;
    let bestDistance = Infinity;
    data.windows.forEach(function (w) {
      if (!w.gold) return;
      const x0 = u.valToPos(w.start_h, "x") - tolerance;
      const x1 = u.valToPos(w.end_h, "x") + tolerance;
      if (offsetX >= x0 && offsetX <= x1) {
        const d = Math.abs(offsetX - (x0 + x1) / 2);
        if (d < bestDistance) {
          best = w;
          bestDistance = d;
        }
      }
    });
    return best;
  }

  // The window page's plots ------------------------------------------------

  function rangeFor(name, data) {
    const first = data.hours[0];
    const last = data.hours[data.hours.length - 1];
    const end = data.current.end_h;
    let lo;
    let hi;
    if (name === "24") {
      lo = end - 24;
      hi = end + 4;
    } else if (name === "72") {
      lo = end - 72;
      hi = end + 12;
    } else {
      lo = first - 1;
      hi = last;
    }
    return { min: Math.max(lo, first - 1), max: Math.min(hi, last) };
  }

  function drawDetail(container, data, controls) {
    const plots = [];
    let syncing = false;
    DETAIL.forEach(function (group) {
      const section = el("section", "plot-group");
      section.appendChild(el("h3", "plot-group-title", group.group));
      const grid = el("div", "plot-grid");
      section.appendChild(grid);
      container.appendChild(section);
      group.plots.forEach(function (spec) {
        const card = el("figure", "plot");
        card.dataset.plot = spec.series[0].key;
        const caption = el("figcaption", "plot-title", spec.title);
        if (spec.unit) caption.appendChild(el("span", "plot-unit", spec.unit));
        card.appendChild(caption);
        const target = el("div", "plot-canvas");
        card.appendChild(target);
        grid.appendChild(card);
        if (!hasValues(data, spec)) {
          card.classList.add("is-empty");
          target.appendChild(el("p", "plot-empty", "Not recorded during this stay."));
          return;
        }
        const u = makePlot(target, data, spec, {
          height: 120,
          xAxis: true,
          legend: true,
          syncKey: "detail",
          zoom: true,
          gold: true,
          hooks: {
            setScale: [
              function (u, key) {
                // A drag-zoom in one plot moves them all.
                if (key !== "x" || syncing) return;
                syncing = true;
                const x = u.scales.x;
                plots.forEach(function (other) {
                  if (other !== u) other.setScale("x", { min: x.min, max: x.max });
                });
                syncing = false;
              },
            ],
          },
        });
        plots.push(u);
        if (citePoints && data.sources) citable(u, target, spec, data);
      });
    });

    function setRange(name) {
      const range = rangeFor(name, data);
      syncing = true;
      plots.forEach(function (u) {
        u.setScale("x", range);
      });
      syncing = false;
      controls.forEach(function (b) {
        b.setAttribute("aria-pressed", b.dataset.range === name ? "true" : "false");
      });
    }
    controls.forEach(function (b) {
      b.addEventListener("click", function () {
        setRange(b.dataset.range);
      });
    });
    const cycle = document.querySelector("[data-shortcut-zoom]");
    if (cycle) {
      cycle.addEventListener("click", function () {
        const names = controls.map(function (b) {
          return b.dataset.range;
        });
        const now = controls.findIndex(function (b) {
          return b.getAttribute("aria-pressed") === "true";
        });
        setRange(names[(now + 1) % names.length]);
      });
    }
    const initial = controls.find(function (b) {
      return b.getAttribute("aria-pressed") === "true";
    });
    setRange(initial ? initial.dataset.range : "24");
    return { plots: plots };
  }

  // Citing a point -----------------------------------------------------------

  function pointSource(data, key, idx) {
    const list = data.sources[key];
    const id = list ? list[idx] : null;
    return id === null || id === undefined ? null : id;
  }

  // The series of the plot with a value and an event at index idx, nearest to
  // the vertical position top (CSS px in the plotting area).
  function nearestSeries(u, spec, data, idx, top) {
    let best = null;
    let bestDistance = Infinity;
    spec.series.forEach(function (s, i) {
      const v = u.data[i + 1][idx];
      if (v === null || v === undefined || pointSource(data, s.key, idx) === null) return;
      const d = top === null ? i : Math.abs(u.valToPos(v, s.scale === "right" ? "right" : "y") - top);
      if (d < bestDistance) {
        best = i;
        bestDistance = d;
      }
    });
    return best === null ? null : { idx: idx, series: best, distance: bestDistance };
  }

  // The point under a pointer position: the hour nearest to it, or the next
  // hour either side when that one has no event, within CITE_REACH_PX.
  function pointAt(u, spec, data, left, top) {
    const idx = u.posToIdx(left);
    let best = null;
    [idx, idx - 1, idx + 1].forEach(function (i) {
      if (i < 0 || i >= u.data[0].length) return;
      const dx = Math.abs(u.valToPos(u.data[0][i], "x") - left);
      const p = nearestSeries(u, spec, data, i, top);
      if (!p || dx > CITE_REACH_PX || p.distance > CITE_REACH_PX) return;
      const d = Math.hypot(dx, p.distance);
      if (!best || d < best.d) best = { idx: i, series: p.series, d: d };
    });
    return best;
  }

  function announce(u, spec, data, point) {
    const s = spec.series[point.series];
    const hour = u.data[0][point.idx];
    const value = u.data[point.series + 1][point.idx];
    const shown = spec.levels ? VENT_SHORT[u._levels[value]] || "" : fmtValue(value);
    document.dispatchEvent(
      new CustomEvent("trajectory:cite", {
        detail: {
          eventId: pointSource(data, s.key, point.idx),
          label: (s.label || s.key) + " " + shown + " · " + hour.toFixed(1) + " h",
          series: s.key,
          hour: hour,
        },
      })
    );
  }

  function showPoint(u, spec, point) {
    const s = spec.series[point.series];
    const v = u.data[point.series + 1][point.idx];
    u.setCursor({
      left: u.valToPos(u.data[0][point.idx], "x"),
      top: u.valToPos(v, s.scale === "right" ? "right" : "y"),
    });
  }

  // Pointer and keyboard ways to cite the points of one plot.
  function citable(u, target, spec, data) {
    let down = null;
    let point = null; // the keyboard's point
    u.over.addEventListener("mousedown", function (event) {
      down = { x: event.clientX, y: event.clientY };
    });
    // Positions in the plotting area, whichever child (a cursor point) was hit.
    function under(event) {
      const box = u.over.getBoundingClientRect();
      return pointAt(u, spec, data, event.clientX - box.left, event.clientY - box.top);
    }
    u.over.addEventListener("click", function (event) {
      // The end of a drag is a zoom, not a click on a point.
      if (down && Math.hypot(event.clientX - down.x, event.clientY - down.y) > 4) return;
      const p = under(event);
      if (p) announce(u, spec, data, p);
    });
    u.over.addEventListener("mousemove", function (event) {
      u.over.style.cursor = under(event) ? "pointer" : "";
    });

    target.tabIndex = 0;
    target.setAttribute("role", "application");
    target.setAttribute(
      "aria-label",
      spec.title + ": Left and Right move along the hours, Up and Down between series, Enter cites the point"
    );
    function citableIndexes() {
      const out = [];
      for (let i = 0; i < u.data[0].length; i++) {
        if (nearestSeries(u, spec, data, i, null)) out.push(i);
      }
      return out;
    }
    function move(step) {
      const indexes = citableIndexes();
      if (!indexes.length) return;
      let at;
      if (!point) {
        // Start at the last point up to the window's end, or the first one.
        const end = data.current ? data.current.end_h : Infinity;
        const before = indexes.filter(function (i) { return u.data[0][i] <= end + 0.5; });
        at = before.length ? before[before.length - 1] : indexes[0];
      } else {
        const k = indexes.indexOf(point.idx);
        const next = k === -1 ? 0 : Math.max(0, Math.min(indexes.length - 1, k + step));
        at = indexes[next];
      }
      const keep = point ? spec.series[point.series].key : null;
      const p = nearestSeries(u, spec, data, at, null);
      const same = spec.series.findIndex(function (s, i) {
        return s.key === keep && pointSource(data, s.key, at) !== null &&
          u.data[i + 1][at] !== null && u.data[i + 1][at] !== undefined;
      });
      point = { idx: at, series: same >= 0 ? same : p.series };
      showPoint(u, spec, point);
    }
    function switchSeries(step) {
      if (!point) return move(0);
      const n = spec.series.length;
      for (let k = 1; k < n; k++) {
        const i = (point.series + step * k + n * k) % n;
        const s = spec.series[i];
        const v = u.data[i + 1][point.idx];
        if (v !== null && v !== undefined && pointSource(data, s.key, point.idx) !== null) {
          point = { idx: point.idx, series: i };
          break;
        }
      }
      showPoint(u, spec, point);
    }
    target.addEventListener("focus", function () {
      if (point) showPoint(u, spec, point);
      else move(0);
    });
    target.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      switch (event.key) {
        case "ArrowLeft": move(-1); break;
        case "ArrowRight": move(1); break;
        case "ArrowUp": switchSeries(-1); break;
        case "ArrowDown": switchSeries(1); break;
        case "Enter":
        case "e":
          if (!point) move(0);
          if (point) announce(u, spec, data, point);
          break;
        default:
          return;
      }
      // The page's own keys (window and row navigation, "e" on a row) stay out.
      event.preventDefault();
      event.stopPropagation();
    });
  }

  // Loading ----------------------------------------------------------------

  function showError(message) {
    root.querySelectorAll("[data-overview], [data-plots]").forEach(function (node) {
      node.classList.remove("is-loading");
      const p = el("p", "plot-error", message);
      p.setAttribute("role", "alert");
      node.appendChild(p);
    });
  }

  let tracksUrl = root.dataset.tracksUrl;
  if (citePoints) tracksUrl += (tracksUrl.indexOf("?") === -1 ? "?" : "&") + "sources=1";
  fetch(tracksUrl, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  })
    .then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    })
    .then(function (data) {
      if (!data.hours.length) {
        showError("No concept tracks for this stay yet.");
        return;
      }
      const drawn = [];
      const overview = root.querySelector("[data-overview]");
      if (overview) {
        overview.classList.remove("is-loading");
        drawn.push(drawOverview(overview, data));
      }
      const detail = root.querySelector("[data-plots]");
      if (detail && data.current) {
        detail.classList.remove("is-loading");
        const controls = Array.from(root.querySelectorAll("[data-range]"));
        drawn.push(drawDetail(detail, data, controls));
      }
      root.dataset.ready = "true";
      if (typeof ResizeObserver !== "undefined") {
        let pending = null;
        new ResizeObserver(function () {
          if (pending) cancelAnimationFrame(pending);
          pending = requestAnimationFrame(function () {
            drawn.forEach(function (d) {
              d.plots.forEach(function (u) {
                const width = u.root.parentNode.clientWidth;
                if (width && Math.abs(width - u.width) > 1) {
                  u.setSize({ width: width, height: u.height });
                }
              });
              if (d.after) d.after();
            });
          });
        }).observe(root);
      }
    })
    .catch(function (error) {
      showError("The plots could not be loaded (" + error.message + "). Reload the page to try again.");
    });
})();
