"""Which windows a campaign takes and who labels each: a seeded draw of windows
balanced over stays, and rater sets that balance load and let every pair of
physicians share windows, so that agreement can be measured for each pair."""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from itertools import combinations


def windows_per_stay_allocate(
    *, available: dict[Hashable, int], order: Sequence[Hashable], total: int
) -> dict[Hashable, int]:
    """Spread ``total`` windows over the stays as evenly as their windows allow:
    a stay with too few gives its share to the others (water-filling); where the
    total does not divide evenly, the first stays of ``order`` get one more."""
    alloc = {stay: 0 for stay in order}
    remaining = min(total, sum(available[stay] for stay in order))
    open_ = [stay for stay in order if available[stay] > 0]
    while remaining > 0 and open_:
        share, extra = divmod(remaining, len(open_))
        for i, stay in enumerate(open_):
            give = min(share + (1 if i < extra else 0), available[stay] - alloc[stay])
            alloc[stay] += give
            remaining -= give
        open_ = [stay for stay in open_ if alloc[stay] < available[stay]]
    return alloc


def windows_draw(
    *,
    windows_by_stay: dict[Hashable, list],
    seed: int,
    window_count: int | None = None,
    stay_count: int | None = None,
) -> list:
    """Draw a campaign's windows from ``windows_by_stay`` (each stay's windows in
    index order, keyed by something stable such as the stay's source id).

    ``stay_count`` stays are drawn first (all of them when None), then
    ``window_count`` windows spread over them as evenly as each stay's windows
    allow (every window of the drawn stays when None), each stay's drawn at
    random. Stays are sorted before any draw and each draw has its own seeded
    generator, so the same windows, counts and seed give the same draw whatever
    the database keys. The counts must fit (the caller checks and says why);
    windows come back stay by stay, in index order.
    """
    stays = sorted(windows_by_stay)
    if stay_count is not None:
        draw = random.Random(f"campaign:{seed}:stays")
        stays = sorted(draw.sample(stays, stay_count))
    if window_count is None:
        return [w for stay in stays for w in windows_by_stay[stay]]
    # Which stays get one window more when the count does not divide evenly: a
    # seeded order, not the lowest ids.
    order = random.Random(f"campaign:{seed}:extra").sample(stays, len(stays))
    alloc = windows_per_stay_allocate(
        available={stay: len(windows_by_stay[stay]) for stay in stays},
        order=order,
        total=window_count,
    )
    drawn = []
    for stay in stays:
        windows = windows_by_stay[stay]
        picks = random.Random(f"campaign:{seed}:stay:{stay}").sample(
            range(len(windows)), alloc[stay]
        )
        drawn += [windows[i] for i in sorted(picks)]
    return drawn


def round_robin_pairs(n: int) -> list[tuple[int, int]]:
    """Every pair of ``0..n-1`` once, in round-robin tournament order (the circle
    method): each round is a matching, so consecutive pairs spread the load."""
    players: list[int | None] = list(range(n))
    if n % 2:
        players.append(None)  # the bye
    size = len(players)
    pairs = []
    for _round in range(size - 1):
        for i in range(size // 2):
            a, b = players[i], players[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        players = [players[0], players[-1], *players[1:-1]]
    return pairs


def balanced_rater_sets(
    *, physicians: int, windows: int, per_window: int
) -> list[tuple[int, ...]]:
    """``per_window`` distinct physician indices for each of ``windows`` windows.

    Loads never differ by more than one: each window goes to the least-loaded
    physicians. Within that rule, pairs are taken in round-robin order, a pair
    leaving the queue once it shares a window, so with two raters per window
    every pair shares one after n(n-1)/2 windows (the fewest possible); with more
    raters, soon after. Deterministic: the same sizes give the same sets.
    """
    if not 1 <= per_window <= physicians:
        raise ValueError("per_window must be within 1..physicians")
    order = round_robin_pairs(physicians)
    queue = list(order)
    load = [0] * physicians
    shared: dict[tuple[int, int], int] = {}
    out: list[tuple[int, ...]] = []
    for _ in range(windows):
        # The chosen set must be the per_window lowest loads: everyone below the
        # threshold load, and ``room`` of those at it.
        threshold = sorted(load)[per_window - 1]
        must = [p for p in range(physicians) if load[p] < threshold]
        may = {p for p in range(physicians) if load[p] == threshold}
        room = per_window - len(must)

        def fits(pair, must=must, may=may, room=room) -> bool:
            return all(p in may or p in must for p in pair) and (
                sum(p in may for p in pair) <= room
            )

        if per_window == 1:
            chosen = [min(may)]
        else:
            pair = next((p for p in queue if fits(p)), None)
            if pair is None:
                pair = min(
                    (p for p in order if fits(p)),
                    key=lambda p: (shared.get(p, 0), order.index(p)),
                )
            chosen = list(pair)
            chosen += [p for p in must if p not in chosen]
            while len(chosen) < per_window:
                candidates = [p for p in sorted(may) if p not in chosen]
                chosen.append(
                    min(
                        candidates,
                        key=lambda p, chosen=chosen: (
                            sum(shared.get((min(p, c), max(p, c)), 0) for c in chosen),
                            p,
                        ),
                    )
                )
        for p in chosen:
            load[p] += 1
        for pair in combinations(sorted(chosen), 2):
            shared[pair] = shared.get(pair, 0) + 1
            if pair in queue:
                queue.remove(pair)
        if not queue:
            queue = list(order)
        out.append(tuple(sorted(chosen)))
    return out
