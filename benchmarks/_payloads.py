"""An online endpoint's payload bytes per window against the window's index
in its stay (issue 32, item 2), streamed (agents.sessions) and whole every
window: agents_bench.py's ``--payload-bytes`` mode, and the table its default
mode prints of the bytes it measured."""

from __future__ import annotations

import json
import statistics


def payload_bytes(n_stays: int) -> None:
    """Payload bytes per window by its index in the stay, streamed and whole,
    over every window of the demo's ``n_stays`` longest stays."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents.context import stay_contexts
    from agents.sessions import StaySession
    from windows.importers.clif import clif_import
    from windows.models import Stay, Window
    from windows.windowing import windows_build

    clif_import()
    stays = sorted(Stay.objects.all(), key=lambda s: (-s.length_hours, s.pk))
    by_index: dict[str, dict[int, list[int]]] = {"streamed": {}, "full": {}}
    for stay in stays[:n_stays]:
        windows_build(stay=stay)
        ids = list(Window.objects.filter(stay=stay).values_list("pk", flat=True))
        sessions = {mode: StaySession(stay_id=stay.pk, mode=mode) for mode in by_index}
        totals = dict.fromkeys(by_index, 0)
        for ctx in stay_contexts(stay, ids):
            for mode, session in sessions.items():
                body = json.dumps(session.payload(ctx), ensure_ascii=False)
                size = len(body.encode("utf-8"))
                totals[mode] += size
                by_index[mode].setdefault(ctx.window_index, []).append(size)
        print(
            f"stay {stay.pk}: {len(ids)} windows, {stay.length_hours:.0f} h: "
            f"streamed {totals['streamed'] / 2**20:.2f} MiB, whole every window "
            f"{totals['full'] / 2**20:.2f} MiB "
            f"({totals['full'] / max(1, totals['streamed']):.0f} times)"
        )
    print_by_index(by_index)


def print_by_index(by_index: dict[str, dict[int, list[int]]]) -> None:
    """Mean payload KiB per window index, the modes side by side."""
    modes = list(by_index)
    indexes = sorted({i for sizes in by_index.values() for i in sizes})
    print("  window index: mean payload KiB (" + " | ".join(modes) + ")")
    step = max(1, len(indexes) // 24)
    for index in indexes[::step]:
        cells = []
        for mode in modes:
            sizes = by_index[mode].get(index)
            cells.append(
                f"{statistics.mean(sizes) / 1024:9.1f}" if sizes else f"{'-':>9s}"
            )
        count = max(len(by_index[m].get(index, ())) for m in modes)
        print(f"    {index:4d}: " + " | ".join(cells) + f"   ({count} stays)")
