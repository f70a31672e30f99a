"""Candidate windows of a stay with their action density, and the draw of the
RealICU-Gold windows from them (spec section 2)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from windows.models import Event, EventKind, SampleRegime, Stay, Window

WINDOW_FIELDS = [
    "start",
    "end",
    "hours_since_admit",
    "event_count",
    "action_count",
    "action_density",
]


def window_settings() -> dict:
    """Window and Gold defaults, from settings when the project sets them."""
    return {
        "window_minutes": getattr(settings, "REALICU_WINDOW_MINUTES", 30),
        "stride_hours": getattr(settings, "REALICU_WINDOW_STRIDE_HOURS", 2),
        "per_stay": getattr(settings, "REALICU_GOLD_PER_STAY", 10),
        "high_share": getattr(settings, "REALICU_GOLD_HIGH_SHARE", 0.8),
    }


def _check_window_settings(*, window_minutes: float, stride_hours: float) -> None:
    if window_minutes <= 0 or stride_hours <= 0:
        raise ValidationError(
            f"Window length and stride must be positive, not {window_minutes} min "
            f"and {stride_hours} h."
        )


def _check_gold_settings(*, per_stay: int, high_share: float) -> None:
    if per_stay < 0:
        raise ValidationError(f"Windows per stay must be >= 0, not {per_stay}.")
    if not 0 <= high_share <= 1:
        raise ValidationError(
            f"The high-density share must be within 0..1, not {high_share}."
        )


def window_bounds(
    *, intime, outtime, window_minutes: float, stride_hours: float
) -> list[tuple]:
    """``(start, end)`` of each window: one every ``stride_hours`` from ``intime``,
    up to the last that ends no later than ``outtime``."""
    _check_window_settings(window_minutes=window_minutes, stride_hours=stride_hours)
    length = timedelta(minutes=window_minutes)
    stride = timedelta(hours=stride_hours)
    bounds = []
    start = intime
    while start + length <= outtime:
        bounds.append((start, start + length))
        start = intime + stride * len(bounds)
    return bounds


def _window_references():
    """Every relation that points at a window from elsewhere (campaigns,
    assignments, labels, agreements, Oracle labels, release records), hidden
    reverse names included."""
    return [
        rel
        for rel in Window._meta.get_fields(include_hidden=True)
        if rel.auto_created and not rel.concrete and (rel.one_to_many or rel.one_to_one)
    ]


def windows_change_check(*, stay: Stay, bounds: list[tuple]) -> None:
    """Refuse to move or delete a window that anything refers to: a label
    written for ``[10:00, 10:30)`` must not come to mean another half hour
    because the window settings changed. Raises ValidationError naming the
    windows; changes nothing."""
    existing = {
        index: (pk, start, end)
        for pk, index, start, end in Window.objects.filter(stay=stay).values_list(
            "pk", "index", "start", "end"
        )
    }
    changed = {
        pk: index
        for index, (pk, start, end) in existing.items()
        if index >= len(bounds) or bounds[index] != (start, end)
    }
    if not changed:
        return
    referenced: set[int] = set()
    for rel in _window_references():
        referenced.update(
            rel.related_model._default_manager.filter(
                **{f"{rel.field.name}__in": list(changed)}
            ).values_list(rel.field.name, flat=True)
        )
    if referenced:
        indexes = sorted(changed[pk] for pk in referenced)
        raise ValidationError(
            f"Stay {stay.pk}: windows {', '.join(map(str, indexes))} are in a "
            "campaign, an Oracle run or a release, so their bounds cannot change. "
            "Build with the window settings they were made with; nothing was "
            "changed."
        )


def _window_rows(*, stay: Stay, bounds: list[tuple]) -> list[Window]:
    """Unsaved windows of ``bounds`` with their counts: observations and actions
    of the stay's admission with ``start <= time < end`` (outcome events are not
    counted); action density is actions / events, 0 for an empty window."""
    from windows.tracks import epoch_us, event_times_us

    if not bounds:
        return []
    times, kinds = event_times_us(
        Event.objects.filter(
            admission_id=stay.admission_id,
            time__gte=bounds[0][0],
            time__lt=bounds[-1][1],
            kind__in=[EventKind.OBSERVATION, EventKind.ACTION],
        ),
        "kind",
    )
    order = np.argsort(times, kind="stable")
    times = times[order]
    action_times = times[np.asarray(kinds, dtype=object)[order] == EventKind.ACTION]
    starts = np.array([epoch_us(start) for start, _ in bounds], dtype=np.int64)
    ends = np.array([epoch_us(end) for _, end in bounds], dtype=np.int64)
    counts = np.searchsorted(times, ends) - np.searchsorted(times, starts)
    actions = np.searchsorted(action_times, ends) - np.searchsorted(
        action_times, starts
    )
    return [
        Window(
            stay=stay,
            index=index,
            start=start,
            end=end,
            hours_since_admit=stay.hours_since_admit(start),
            event_count=int(n),
            action_count=int(a),
            action_density=int(a) / int(n) if n else 0.0,
        )
        for index, ((start, end), n, a) in enumerate(zip(bounds, counts, actions))
    ]


def _windows_write(*, stay: Stay, rows: list[Window], fields: list[str]) -> None:
    """Upsert ``rows`` on (stay, index), writing ``fields``, and delete the
    stay's windows beyond them."""
    with transaction.atomic():
        if rows:
            Window.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["stay", "index"],
                update_fields=fields,
            )
        Window.objects.filter(stay=stay, index__gte=len(rows)).delete()


def windows_build(
    *,
    stay: Stay,
    window_minutes: float | None = None,
    stride_hours: float | None = None,
) -> list[Window]:
    """Create or refresh the candidate windows of a stay, ordered by index.

    Counts cover observations and actions of the stay's admission with
    ``start <= time < end``; outcome events are not counted. Action density is
    actions / events, 0 for an empty window. Idempotent: rows are upserted on
    (stay, index), so a rerun updates counts in place and keeps Gold sampling;
    windows that no longer fit (a shorter stay, other settings) are deleted.
    """
    defaults = window_settings()
    window_minutes = (
        defaults["window_minutes"] if window_minutes is None else window_minutes
    )
    stride_hours = defaults["stride_hours"] if stride_hours is None else stride_hours
    bounds = window_bounds(
        intime=stay.intime,
        outtime=stay.outtime,
        window_minutes=window_minutes,
        stride_hours=stride_hours,
    )
    windows_change_check(stay=stay, bounds=bounds)
    rows = _window_rows(stay=stay, bounds=bounds)
    _windows_write(stay=stay, rows=rows, fields=WINDOW_FIELDS)
    return list(Window.objects.filter(stay=stay).order_by("index"))


def gold_counts(
    *, n: int, high_available: int, control_available: int, high_share: float
) -> tuple[int, int]:
    """How many high-density and control windows to draw for ``n`` windows: the
    share rounded half up, a short pool filled from the other."""
    n = min(n, high_available + control_available)
    n_high = min(math.floor(n * high_share + 0.5), high_available)
    n_control = min(n - n_high, control_available)
    n_high = n - n_control
    return n_high, n_control


def windows_sample_gold(
    *,
    stay: Stay,
    seed: int,
    per_stay: int | None = None,
    high_share: float | None = None,
) -> list[Window]:
    """Draw the stay's Gold windows and return them, ordered by index.

    Every window is classed high-density (action density above the stay's median and
    at least one action) or control; about ``high_share`` of ``per_stay`` windows
    are drawn from the first, the rest from the second, a short pool being filled
    from the other. The draw depends only on the seed and the stay's source id, so
    it is the same whatever order stays are processed in. Any previous draw for the
    stay is replaced.
    """
    defaults = window_settings()
    per_stay = defaults["per_stay"] if per_stay is None else per_stay
    high_share = defaults["high_share"] if high_share is None else high_share
    _check_gold_settings(per_stay=per_stay, high_share=high_share)

    windows = list(Window.objects.filter(stay=stay).order_by("index"))
    gold = _gold_draw(
        stay=stay, windows=windows, seed=seed, per_stay=per_stay, high_share=high_share
    )
    Window.objects.bulk_update(
        windows, ["sampled_gold", "sample_regime"], batch_size=1000
    )
    return gold


def _gold_draw(
    *, stay: Stay, windows: list[Window], seed: int, per_stay: int, high_share: float
) -> list[Window]:
    """The draw of windows_sample_gold on ``windows`` (the stay's, in index
    order): sets ``sample_regime`` and ``sampled_gold`` on each, writes
    nothing; returns the drawn ones in index order."""
    if not windows:
        return []
    median = statistics.median(w.action_density for w in windows)
    high, control = [], []
    for w in windows:
        is_high = w.action_density > median and w.action_count >= 1
        w.sample_regime = SampleRegime.HIGH_DENSITY if is_high else SampleRegime.CONTROL
        w.sampled_gold = False
        (high if is_high else control).append(w)
    n_high, n_control = gold_counts(
        n=per_stay,
        high_available=len(high),
        control_available=len(control),
        high_share=high_share,
    )
    rng = random.Random(f"gold:{seed}:{stay.source}:{stay.source_id}")
    for w in rng.sample(high, n_high) + rng.sample(control, n_control):
        w.sampled_gold = True
    return [w for w in windows if w.sampled_gold]


@dataclass
class WindowsBuildSummary:
    """What a windows run did; printed by the command."""

    stays: int = 0
    stays_without_windows: int = 0
    windows: int = 0
    gold: int = 0
    gold_high: int = 0
    gold_control: int = 0
    stays_high_short: int = 0
    settings: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        s = self.settings
        lines = [
            (
                f"Windows of {s.get('window_minutes')} min every "
                f"{s.get('stride_hours')} h; Gold: {s.get('per_stay')} per stay, "
                f"{s.get('high_share')} high-density, seed {s.get('seed')}"
            ),
            f"  {'stays':<34} {self.stays:>8}",
            f"  {'stays without a full window':<34} {self.stays_without_windows:>8}",
            f"  {'candidate windows':<34} {self.windows:>8}",
            f"  {'gold windows':<34} {self.gold:>8}",
            f"  {'  high-density':<34} {self.gold_high:>8}",
            f"  {'  control':<34} {self.gold_control:>8}",
            f"  {'stays short of high-density':<34} {self.stays_high_short:>8}",
        ]
        return "\n".join(lines)


def windows_build_many(
    *,
    stays: Iterable[Stay],
    seed: int,
    window_minutes: float | None = None,
    stride_hours: float | None = None,
    per_stay: int | None = None,
    high_share: float | None = None,
    progress=None,
) -> WindowsBuildSummary:
    """Build the windows of each stay and draw its Gold windows. Each stay is its own
    transaction: a crash leaves every finished stay whole, and a rerun is harmless."""
    defaults = window_settings()
    given = {
        "window_minutes": window_minutes,
        "stride_hours": stride_hours,
        "per_stay": per_stay,
        "high_share": high_share,
    }
    resolved = {k: defaults[k] if v is None else v for k, v in given.items()}
    # Refuse bad settings before any stay is written.
    _check_window_settings(
        window_minutes=resolved["window_minutes"], stride_hours=resolved["stride_hours"]
    )
    _check_gold_settings(
        per_stay=resolved["per_stay"], high_share=resolved["high_share"]
    )
    resolved["seed"] = seed
    stays = list(stays)
    bounds_of = {
        stay.pk: window_bounds(
            intime=stay.intime,
            outtime=stay.outtime,
            window_minutes=resolved["window_minutes"],
            stride_hours=resolved["stride_hours"],
        )
        for stay in stays
    }
    # Every stay that has windows (only those can have windows something refers
    # to) is checked before the first is written, so a refusal changes nothing.
    built = set(
        Window.objects.filter(stay__in=[s.pk for s in stays])
        .values_list("stay_id", flat=True)
        .distinct()
    )
    for stay in stays:
        if stay.pk in built:
            windows_change_check(stay=stay, bounds=bounds_of[stay.pk])
    summary = WindowsBuildSummary(settings=resolved)
    if progress is not None:
        progress.start(len(stays), "windows")
    for stay in stays:
        # The windows and their Gold draw in one write (windows_build, then
        # windows_sample_gold, made in memory: the same rows and the same draw).
        rows = _window_rows(stay=stay, bounds=bounds_of[stay.pk])
        gold = _gold_draw(
            stay=stay,
            windows=rows,
            seed=seed,
            per_stay=resolved["per_stay"],
            high_share=resolved["high_share"],
        )
        with transaction.atomic():
            if stay.pk in built:  # checked again where the write is
                windows_change_check(stay=stay, bounds=bounds_of[stay.pk])
            _windows_write(
                stay=stay,
                rows=rows,
                fields=WINDOW_FIELDS + ["sampled_gold", "sample_regime"],
            )
        windows = rows
        summary.stays += 1
        summary.windows += len(windows)
        summary.stays_without_windows += not windows
        summary.gold += len(gold)
        high = sum(w.sample_regime == SampleRegime.HIGH_DENSITY for w in gold)
        summary.gold_high += high
        summary.gold_control += len(gold) - high
        n = min(resolved["per_stay"], len(windows))
        summary.stays_high_short += high < math.floor(n * resolved["high_share"] + 0.5)
        if progress is not None:
            progress.advance(
                1, f"stay {stay.pk}: {len(windows)} windows, {len(gold)} gold"
            )
    return summary
