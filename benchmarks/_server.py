"""The web server the load benchmarks start (gunicorn with the project's
gunicorn.conf.py) on a free loopback port, and who used the machine's cores
while it was measured."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


def start_gunicorn(
    port: int, env: dict, log_path: Path, *, workers: int | None, threads: int | None
) -> subprocess.Popen:
    """gunicorn with the project's gunicorn.conf.py (workers and threads sized
    to the machine's cores); ``workers``/``threads`` override it to compare."""
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "realicu_web.wsgi",
        "--config",
        str(ROOT / "gunicorn.conf.py"),
        "--bind",
        f"{HOST}:{port}",
    ]
    if workers:
        command += ["--workers", str(workers)]
    if threads:
        command += ["--threads", str(threads)]
    proc = subprocess.Popen(
        command,
        cwd=str(ROOT),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc._bench_log = log  # type: ignore[attr-defined]
    return proc


def gunicorn_shape(workers: int | None, threads: int | None) -> str:
    """Workers and threads the server runs with: the overrides, else the
    config file's."""
    import runpy

    conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    return (
        f"{workers or conf['workers']} workers x "
        f"{threads or conf['threads']} threads, {conf['worker_class']}"
    )


# CPU accounting: who used the machine's cores during the timed run ------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return (sum(fields) - idle) / _TICK, sum(fields) / _TICK


def processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds used) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        out[int(entry)] = (
            int(rest[1]),
            cmd,
            (float(rest[11]) + float(rest[12])) / _TICK,
        )
    return out


def cpu_snapshot(server_pid: int, database: str) -> dict:
    """CPU seconds so far of the machine, the server's processes, the
    PostgreSQL backends of ``database``, this process and every other one."""
    import resource

    procs = processes()
    server = {server_pid} | {
        pid for pid, (ppid, _, _) in procs.items() if ppid == server_pid
    }
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "machine": machine_cpu(),
        "server": {pid: procs[pid][2] for pid in server if pid in procs},
        "postgres": {
            pid: cpu
            for pid, (_, cmd, cpu) in procs.items()
            if cmd.startswith("postgres:") and f" {database} " in cmd
        },
        "client": usage.ru_utime + usage.ru_stime,
        "load": os.getloadavg(),
        "others_by_pid": {
            pid: (cmd[:70], cpu)
            for pid, (_, cmd, cpu) in procs.items()
            if pid not in server and pid != os.getpid()
        },
    }


def cpu_report(before: dict, after: dict, elapsed: float) -> list[str]:
    def delta(key):
        return sum(
            max(0.0, cpu - before[key].get(pid, 0.0)) for pid, cpu in after[key].items()
        )

    busy = after["machine"][0] - before["machine"][0]
    total = after["machine"][1] - before["machine"][1]
    cores = os.cpu_count() or 1
    server, postgres = delta("server"), delta("postgres")
    client = after["client"] - before["client"]
    rest = max(0.0, busy - server - postgres - client)
    others = []
    for pid, (cmd, cpu) in after["others_by_pid"].items():
        used = cpu - before["others_by_pid"].get(pid, (cmd, 0.0))[1]
        if used >= 1.0 and pid not in after["postgres"]:
            others.append((used, cmd))
    others.sort(reverse=True)
    lines = [
        f"CPU during the run ({cores} cores, {elapsed:.0f} s): machine busy "
        f"{100 * busy / total:.0f}% ({busy:.0f} core-s); gunicorn {server:.0f}, "
        f"load generator {client:.0f}, its PostgreSQL backends {postgres:.0f}, "
        f"everything else {rest:.0f} core-s; load average "
        f"{before['load'][0]:.1f} -> {after['load'][0]:.1f}",
    ]
    if others:
        lines.append(
            "  other busy processes: "
            + "; ".join(f"{cmd} {used:.0f} s" for used, cmd in others[:5])
        )
    return lines


def wait_until_up(base: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    import requests

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}")
        try:
            if requests.get(f"{base}/accounts/login/", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise SystemExit("gunicorn did not answer in time")


def process_stop(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM to a server the benchmark started (gunicorn, or ``manage.py
    serve``'s supervisor, which stops its web and worker), then SIGKILL if it
    has not exited within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_gunicorn(proc: subprocess.Popen) -> None:
    process_stop(proc, timeout=20)
    proc._bench_log.close()  # type: ignore[attr-defined]
