"""Who labels which window: rater sets that balance load and let every pair of
physicians share windows, so that agreement can be measured for each pair."""

from __future__ import annotations

from itertools import combinations


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
