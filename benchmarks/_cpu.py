"""Wall time beside CPU time and the load average, for every benchmark's
figures (issue 35): on a shared machine the wall time also holds what other
processes took, the CPU time is the work done, and the load average says how
shared the machine was.

    from benchmarks._cpu import clock, since, report_at_exit

    started = clock()
    ...                      # the measured step
    print(f"step: {since(started)}")

``report_at_exit()`` (one line at a script's start) prints the whole run's
figures when the script ends, for a benchmark that prints no others.
"""

from __future__ import annotations

import atexit
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Clock:
    wall: float  # time.perf_counter()
    cpu: float  # user + system seconds of this process and its waited children


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of every child it has
    waited for (a subprocess.run, a stopped server), so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def clock() -> Clock:
    return Clock(wall=time.perf_counter(), cpu=cpu_seconds())


def load() -> str:
    """The load average (1, 5, 15 minutes), as printed beside a figure."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def since(started: Clock) -> str:
    """``wall W s, CPU C s (...), load average ...`` since ``started``."""
    now = clock()
    return (
        f"wall {now.wall - started.wall:.2f} s, CPU {now.cpu - started.cpu:.2f} s "
        f"(this process and its children), {load()}"
    )


def command_timed(
    argv: list[str], env: dict
) -> tuple[subprocess.CompletedProcess, float, float]:
    """``argv`` run from the project's folder, its output captured as text:
    the finished process, its wall seconds and its CPU seconds (user + system
    of it and of the children it waited for, start-up included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, seconds, cpu


def report_at_exit(label: str | None = None) -> None:
    """Prints the run's wall time, CPU time and load average when the script
    ends. Not for a script's ``--part`` runs (their last line is JSON read
    back by the parent, whose CPU time already holds theirs) nor ``--help``."""
    if {"--part", "-h", "--help"} & set(sys.argv[1:]):
        return
    started = clock()
    name = label or os.path.basename(sys.argv[0])

    def report() -> None:
        print(f"{name}, the whole run: {since(started)}", flush=True)

    atexit.register(report)


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stats() -> Iterator[tuple[int, str]]:
    """(pid, the text of /proc/<pid>/stat) of every process that can be read;
    none where /proc is not there."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                text = handle.read()
        except OSError:
            continue
        yield int(entry), text


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) so far of the process ``root`` and all its
    descendants, read from /proc: the live ones' own time plus what the
    children they have waited for used (a restarted process's time stays in
    its parent's). 0.0 where /proc is not there."""
    stats: dict[int, tuple[int, float]] = {}
    for pid, text in _proc_stats():
        fields = text[text.rindex(")") + 2 :].split()
        # After the name: state, ppid, ..., utime (14th field), stime, cutime,
        # cstime.
        cpu = sum(float(v) for v in fields[11:15]) / _TICK
        stats[pid] = (int(fields[1]), cpu)
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, (ppid, _) in stats.items() if ppid == pid]
        tree.update(children)
        frontier += children
    return float(sum(stats[pid][1] for pid in tree if pid in stats))


def postgres_server_pid() -> int | None:
    """The PostgreSQL postmaster running on this machine (a ``postgres``
    process whose parent is not one), or None: its tree_cpu is the database
    server's CPU, backends that have exited included (it waits for them)."""
    comms: dict[int, tuple[str, int]] = {}
    for pid, text in _proc_stats():
        name = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        comms[pid] = (name, ppid)
    for pid, (name, ppid) in comms.items():
        if name in ("postgres", "postmaster") and comms.get(ppid, ("",))[0] not in (
            "postgres",
            "postmaster",
        ):
            return pid
    return None


def own_cpu() -> float:
    """This process's CPU seconds (the clients' threads), its children's aside."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ServeStep:
    """A step's wall time and CPU time: serve's processes (supervisor, web,
    worker: /proc) and this process (the clients' threads), with the load
    average at its end."""

    def __init__(self, serve_pid: int) -> None:
        self.serve_pid = serve_pid
        self.started = clock()
        self.clients_cpu = own_cpu()
        self.serve_cpu = tree_cpu(serve_pid)

    def line(self) -> str:
        wall = time.perf_counter() - self.started.wall
        serve = tree_cpu(self.serve_pid) - self.serve_cpu
        clients = own_cpu() - self.clients_cpu
        return (
            f"wall {wall:.1f} s; CPU serve's processes {serve:.1f} s, clients "
            f"{clients:.1f} s; {load()}"
        )
