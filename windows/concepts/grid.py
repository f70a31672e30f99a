"""The hourly grid of one ICU stay and the prepared event table that every
concept function reads (CLINICAL_CONCEPTS.md section 0).

Times are held as integer nanoseconds since ICU admission (``intime``), so hour
arithmetic is exact integer arithmetic. Row ``hour = h`` covers the right-closed
interval ``(intime + (h - 1) h, intime + h h]``; an event at time ``t`` belongs
to hour ``ceil((t - intime) / 1 h)``.

Deviation from mimic-code, on purpose: the anchor is the stay's ``intime`` itself,
not the first heart rate rounded up to the clock hour, so that ``hour`` is the
platform's ``hours_since_admit`` of the hour's end.

The last row ends at ICU discharge (``outtime``), not at its whole hour: events
after discharge are dropped (microbiology cultures excepted, which section 10b
pairs with the stay's antibiotics), interval records end at discharge, and a
state at the hour end (an infusion rate) is read at discharge for that row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from windows.event_fields import EVENT_VALUE_FIELDS

HOUR = 3_600_000_000_000  # ns
NO_TIME = np.iinfo(np.int64).min

EVENT_COLUMNS = (
    "time",
    "end_time",
    *EVENT_VALUE_FIELDS,
    "order_id",
)
# How far before ICU admission the grid reaches at most (section 0: hours from -24).
LOOKBACK_HOURS = 24
CULTURE_DOMAIN = "microbiology_culture"


def utc(value) -> pd.Timestamp:
    """A timezone-aware UTC timestamp; a naive value is taken to be UTC."""
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _ns(values: pd.Series) -> np.ndarray:
    """Nanoseconds since the epoch, NO_TIME where missing (naive times are UTC)."""
    values = pd.Series(values).reset_index(drop=True)
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        # Already times (windows.tracks.events_frame): NaT is NO_TIME's value.
        naive = values.dt.tz_convert("UTC").dt.tz_localize(None)
        return naive.to_numpy(dtype="datetime64[ns]").view("int64")
    out = np.full(len(values), NO_TIME, dtype=np.int64)
    present = values.notna().to_numpy()
    if not present.any():
        return out
    # Converting only the present values keeps a mostly empty object column
    # (end_time) cheap.
    times = pd.to_datetime(values[present] if not present.all() else values, utc=True)
    arr = times.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]")
    out[present] = arr.view("int64")
    return out


def _text(values, *, clean: bool = False) -> pd.Categorical:
    """Text as a categorical ('' for missing), lower-cased and stripped when
    ``clean``; string work is done once per distinct value."""
    codes, uniques = pd.factorize(
        pd.Series(values).to_numpy(dtype=object), use_na_sentinel=True
    )
    labels = ["" if pd.isna(u) else str(u) for u in uniques]
    if clean:
        labels = [label.strip().lower() for label in labels]
    labels.append("")
    categories = list(dict.fromkeys(labels))
    position = {label: i for i, label in enumerate(categories)}
    remap = np.array([position[label] for label in labels], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes], categories=categories)


def ceil_hours(rel_ns: np.ndarray) -> np.ndarray:
    """The right-closed hour index of relative times: ceil(t / 1 h)."""
    return -((-rel_ns) // HOUR)


def floor_hours(rel_ns: np.ndarray) -> np.ndarray:
    return rel_ns // HOUR


@dataclass
class Stay:
    """One stay's events, prepared, on its hourly grid.

    ``domain(name)`` returns the events of one CLIF domain as a frame sorted by
    time with columns ``t`` (ns since intime), ``end`` (ns since intime, NO_TIME
    when the record is a point event), ``kind`` and ``cat`` (the category), both
    lower-cased and stripped, ``name``, ``value_num``, ``unit``,
    ``value_text`` and ``order_id`` (as given, '' when missing). Text columns
    are categoricals: compare them or use ``.str``; ``astype(object)`` before
    ``map``.
    """

    intime: pd.Timestamp
    outtime: pd.Timestamp
    first_hour: int
    last_hour: int
    weight_override: float | None
    _domains: dict[str, pd.DataFrame]
    _cache: dict = field(default_factory=dict)

    # --- grid ---------------------------------------------------------------------

    @property
    def n(self) -> int:
        return self.last_hour - self.first_hour + 1

    @property
    def hours(self) -> np.ndarray:
        return np.arange(self.first_hour, self.last_hour + 1, dtype=np.int64)

    @property
    def ends_ns(self) -> np.ndarray:
        """Hour ends in ns since intime."""
        return self.hours * HOUR

    @property
    def hour_end(self) -> pd.DatetimeIndex:
        return self.intime + pd.to_timedelta(self.hours, unit="h")

    @property
    def outtime_ns(self) -> int:
        return int((self.outtime - self.intime).value)

    def rows_of(self, t: np.ndarray) -> np.ndarray:
        """Grid row of each relative time (may fall outside 0..n-1)."""
        return ceil_hours(np.asarray(t, dtype=np.int64)) - self.first_hour

    def empty(self) -> np.ndarray:
        return np.full(self.n, np.nan)

    # --- events -------------------------------------------------------------------

    def domain(self, name: str) -> pd.DataFrame:
        key = ("domain", name)
        if key not in self._cache:
            frame = self._domains.get(name)
            if frame is None:
                frame = _empty_events()
            self._cache[key] = frame
        return self._cache[key]

    def select(self, domain: str, categories) -> pd.DataFrame:
        """Events of ``domain`` whose lower-cased category is in ``categories``."""
        frame = self.domain(domain)
        if isinstance(categories, str):
            categories = {categories}
        if frame.empty:
            return frame.iloc[:0]
        positions = self._positions(domain)
        found = [
            positions[c] for c in {c.lower() for c in categories} if c in positions
        ]
        if not found:
            return frame.iloc[:0]
        rows = found[0] if len(found) == 1 else np.sort(np.concatenate(found))
        return frame.iloc[rows]

    def before(self, cutoff) -> Stay:
        """The stay as prepare_stay lays it from the events recorded strictly
        before ``cutoff`` (a time at or before this stay's outtime) with the
        outtime at ``cutoff``: each domain's events are sorted by time, so those
        before it are a prefix of them (same rows, order and index); interval
        ends are cut at it, and the grid runs to it. Text columns keep this
        stay's categories (no track reads a category that no row holds).

        The per-event work (time parsing, text normalization, sorting, the
        category positions ``select`` uses) is thus done once per stay, not
        once per cutoff (surveillance.checkpoints)."""
        cutoff = utc(cutoff)
        cut = int((cutoff - self.intime).value)
        if cut > self.outtime_ns:
            raise ValueError(f"cutoff {cutoff} is after outtime {self.outtime}")
        domains: dict[str, pd.DataFrame] = {}
        cache: dict = {}
        for name, frame in self._domains.items():
            k = int(np.searchsorted(frame["t"].to_numpy(), cut, side="left"))
            if k == 0:
                continue
            prefix = frame if k == len(frame) else frame.iloc[:k]
            end = prefix["end"].to_numpy()
            if (end > cut).any():
                # NO_TIME (no end) is below any cutoff: it stays.
                prefix = prefix.assign(end=np.minimum(end, cut))
            domains[name] = prefix
            positions = {}
            for cat, rows in self._positions(name).items():
                kept = rows[: int(np.searchsorted(rows, k, side="left"))]
                if len(kept):
                    positions[cat] = kept
            cache[("positions", name)] = positions
        first_hour = 0
        if domains:
            first_t = min(int(f["t"].iat[0]) for f in domains.values())
            first_event_hour = int(ceil_hours(np.array([first_t]))[0])
            first_hour = min(0, max(-LOOKBACK_HOURS, first_event_hour))
        last_hour = int(ceil_hours(np.array([cut]))[0])
        return Stay(
            intime=self.intime,
            outtime=cutoff,
            first_hour=first_hour,
            last_hour=max(last_hour, 0),
            weight_override=self.weight_override,
            _domains=domains,
            _cache=cache,
        )

    def _positions(self, domain: str) -> dict[str, np.ndarray]:
        """Row positions of each category of ``domain`` (ascending), found once:
        a stay's tracks select from the same domains some thirty times."""
        key = ("positions", domain)
        if key not in self._cache:
            self._cache[key] = {
                str(cat): rows
                for cat, rows in self.domain(domain)
                .groupby("cat", observed=True)
                .indices.items()
            }
        return self._cache[key]

    # --- hourly aggregation -------------------------------------------------------

    def hourly(self, t: np.ndarray, values: np.ndarray, how: str) -> np.ndarray:
        """Aggregate values into their right-closed hour rows (``how`` any pandas
        groupby reduction: mean, min, max, sum, last, count); NaN for empty rows.
        ``last`` relies on the inputs being sorted by time."""
        rows = self.rows_of(t)
        values = np.asarray(values, dtype=float)
        ok = (rows >= 0) & (rows < self.n) & ~np.isnan(values)
        out = self.empty()
        if ok.any():
            agg = pd.Series(values[ok]).groupby(rows[ok], sort=False).agg(how)
            out[agg.index.to_numpy()] = agg.to_numpy(dtype=float)
        return out

    def latest(self, t: np.ndarray, values: np.ndarray, max_age: int) -> np.ndarray:
        """At each hour end H (ICU discharge for the last row), the latest value
        with time in [H - max_age, H] (values at one time are averaged); NaN
        when there is none."""
        t = np.asarray(t, dtype=np.int64)
        values = np.asarray(values, dtype=float)
        ok = ~np.isnan(values)
        if not ok.any():
            return self.empty()
        per_time = pd.Series(values[ok]).groupby(t[ok]).mean()
        times = per_time.index.to_numpy(dtype=np.int64)
        vals = per_time.to_numpy(dtype=float)
        ends = np.minimum(self.ends_ns, self.outtime_ns)
        idx = np.searchsorted(times, ends, side="right") - 1
        out = self.empty()
        has = idx >= 0
        fresh = has.copy()
        fresh[has] = ends[has] - times[idx[has]] <= max_age
        out[fresh] = vals[idx[fresh]]
        return out

    def at_hour_end(
        self, starts: np.ndarray, ends: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of every interval active at an hour end H, i.e.
        ``start < H <= end`` (section 0, infusions); the last row's end is ICU
        discharge, so an interval running at discharge is active in it."""
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        first = floor_hours(starts) + 1
        last = floor_hours(ends)
        out = self.outtime_ns
        at_discharge = (starts < out) & (ends >= out)
        last = np.where(at_discharge, np.maximum(last, self.last_hour), last)
        return self._expand(first, last, values)

    def overlapping(
        self, starts: np.ndarray, ends: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of every interval [start, end] overlapping an hour row
        (H - 1 h, H]: start <= H and end > H - 1 h."""
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        return self._expand(ceil_hours(starts), ceil_hours(ends), values)

    def _expand(self, first_h, last_h, values) -> tuple[np.ndarray, np.ndarray]:
        first = np.maximum(first_h, self.first_hour) - self.first_hour
        last = np.minimum(last_h, self.last_hour) - self.first_hour
        counts = np.maximum(last - first + 1, 0)
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64), np.empty(0)
        offsets = np.repeat(np.cumsum(counts) - counts, counts)
        rows = np.repeat(first, counts) + (np.arange(total) - offsets)
        return rows, np.repeat(np.asarray(values), counts)

    def reduce_rows(self, rows: np.ndarray, values: np.ndarray, how: str) -> np.ndarray:
        out = self.empty()
        if len(rows):
            agg = pd.Series(np.asarray(values, dtype=float)).groupby(rows).agg(how)
            out[agg.index.to_numpy()] = agg.to_numpy(dtype=float)
        return out

    # --- weight -------------------------------------------------------------------

    def weight_at(self, t: np.ndarray) -> np.ndarray:
        """Body weight (kg) at each time: the ``weight_kg`` given to
        compute_stay_tracks when there is one; else the latest charted weight
        (vitals ``weight_kg`` > 0) at or before t, the first charted weight
        before that (section 3a: each weight holds until the next; the first is
        carried back); NaN when none is charted."""
        t = np.asarray(t, dtype=np.int64)
        if self.weight_override is not None:
            return np.full(len(t), float(self.weight_override))
        weights = self.charted_weights()
        if weights.empty:
            return np.full(len(t), np.nan)
        times = weights.index.to_numpy(dtype=np.int64)
        idx = np.searchsorted(times, t, side="right") - 1
        return weights.to_numpy(dtype=float)[np.maximum(idx, 0)]

    def charted_weights(self) -> pd.Series:
        if "weights" not in self._cache:
            w = self.select("vitals", "weight_kg")
            w = w[w["value_num"] > 0]
            self._cache["weights"] = w.groupby("t")["value_num"].last()
        return self._cache["weights"]

    def weight_used(self) -> float | None:
        """The weight reported for the stay: the override, else the first charted."""
        if self.weight_override is not None:
            return float(self.weight_override)
        weights = self.charted_weights()
        return None if weights.empty else float(weights.iloc[0])


def _empty_events() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "t": np.empty(0, dtype=np.int64),
            "end": np.empty(0, dtype=np.int64),
            "kind": np.empty(0, dtype=object),
            "cat": np.empty(0, dtype=object),
            "name": np.empty(0, dtype=object),
            "value_num": np.empty(0, dtype=float),
            "unit": np.empty(0, dtype=object),
            "value_text": np.empty(0, dtype=object),
            "order_id": np.empty(0, dtype=object),
        }
    )


def prepare_stay(
    events: pd.DataFrame,
    *,
    intime,
    outtime,
    weight_kg: float | None = None,
) -> Stay:
    """Check and normalize the event frame and lay the hourly grid.

    Events without a time are dropped, records coded after discharge too, and
    so are events after ``outtime`` except microbiology cultures; interval ends
    are cut at ``outtime``.
    Missing optional columns are treated as empty. The grid runs from the hour
    of the first event (but not before hour -24 and not after hour 0) to
    ceil(outtime - intime).
    """
    intime = utc(intime)
    outtime = utc(outtime)
    if outtime < intime:
        raise ValueError(f"outtime {outtime} is before intime {intime}")
    if weight_kg is not None and not pd.isna(weight_kg) and not float(weight_kg) > 0:
        raise ValueError(f"weight_kg must be positive, got {weight_kg}")
    missing = {"time", "domain", "category"} - set(events.columns)
    if missing:
        raise ValueError(f"events frame lacks column(s) {sorted(missing)}")
    n = len(events)
    t = _ns(events["time"])
    keep = t != NO_TIME
    kind = _text(events["kind"], clean=True) if "kind" in events else None
    if kind is not None:
        # Records coded after discharge carry a billing date, not a bedside time:
        # no track reads them, and they must not move the grid's first hour.
        keep &= np.asarray(kind != "coded")
    base = intime.value
    out_ns = (outtime - intime).value
    end = _ns(events["end_time"]) if "end_time" in events else np.full(n, NO_TIME)
    # Interval records end at ICU discharge at the latest.
    end = np.where(end == NO_TIME, NO_TIME, np.minimum(end - base, out_ns))

    def text(column: str, clean: bool = False):
        return (
            _text(events[column], clean=clean)
            if column in events
            else _text(np.full(n, ""))
        )

    frame = pd.DataFrame(
        {
            "t": t - base,
            "end": end,
            "kind": kind if kind is not None else text("kind", clean=True),
            "domain": text("domain", clean=True),
            "cat": text("category", clean=True),
            "name": text("name"),
            "value_num": pd.to_numeric(events["value_num"], errors="coerce").to_numpy(
                float
            )
            if "value_num" in events
            else np.full(n, np.nan),
            "unit": text("unit"),
            "value_text": text("value_text"),
            "order_id": text("order_id"),
        }
    )[keep]
    # Nothing recorded after ICU discharge reaches the stay's grid, except the
    # cultures that section 10b pairs with antibiotics given in the stay.
    frame = frame[(frame["t"] <= out_ns) | (frame["domain"] == CULTURE_DOMAIN)]
    frame = frame.sort_values("t", kind="mergesort").reset_index(drop=True)
    domains = {
        str(d): g.drop(columns="domain")
        for d, g in frame.groupby("domain", sort=False, observed=True)
    }

    last_hour = int(ceil_hours(np.array([(outtime - intime).value]))[0])
    first_hour = 0
    if len(frame):
        first_event_hour = int(ceil_hours(frame["t"].to_numpy()[:1])[0])
        first_hour = min(0, max(-LOOKBACK_HOURS, first_event_hour))
    return Stay(
        intime=intime,
        outtime=outtime,
        first_hour=first_hour,
        last_hour=max(last_hour, 0),
        weight_override=None
        if weight_kg is None or pd.isna(weight_kg)
        else float(weight_kg),
        _domains=domains,
    )
