"""Release build and scoring speed.

- Gold (issue 20): a RealICU-Gold release of 160 windows of the CLIF demo, three
  physicians' labels and their consensus; the build's own time (release_build:
  the first build in a fresh process, then five more) and the time of
  ``manage.py build_release`` (start-up included, five runs), each as wall and
  CPU time (on a shared machine the wall time also holds what other processes
  took; the CPU time is the work done), and the command's CPU time per window
  (its process and children), then with the PostgreSQL server's CPU meanwhile
  added (its postmaster's process tree, when it runs on this machine: the
  figure "all processes together" of issue 35), each with the load average.
  Python's byte-code is what `make bench` leaves (`make bytecode`): without
  it, each command compiles its modules at start. Targets: build < 0.5 s,
  command < 2 s; issue 35: at most 2 ms of CPU per window for the demo's Gold
  windows (``--gold-windows 0``: all of them, 1,388 in the issue's comparison
  with Label Studio's export).
- Scale: a RealICU-Scale release of 12,000 windows from generated Oracle labels,
  and the scoring of a 12,000-window prediction file (5 problems, 5 actions; the
  labels carry red flags), each with its time and peak memory (RSS high-water
  mark of a fresh process); scoring with a cold and then a warm embedding cache.
  Targets: build <= 60 s; scoring <= 60 s warm; peak memory < 2 GB.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
        python benchmarks/release_bench.py [--only gold|scale] [--gold-windows N]

DATABASE_URL names the server (its database need not exist): the benchmark
creates and drops its own there, named after it (``<name>_release_bench``;
override with --db); the releases, the broker's folder and the caches go to a
temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchmarks._database as pg  # noqa: E402
from benchmarks._cpu import (  # noqa: E402 - after the path
    command_timed,
    load,
    postgres_server_pid,
    report_at_exit,
    tree_cpu,
)
from benchmarks._label_texts import (  # noqa: E402
    ACTIONS,
    FLAGS,
    PROBLEMS,
    agreed_gold_campaign,
    predictions_write,
    texts_drawn,
)
from benchmarks._parts import (  # noqa: E402
    part_environment,
    part_options,
    part_run,
    peak_mb,
    setup_django,
)

STAYS = 100
WINDOWS_PER_STAY = 120  # 240 h stays, a window every 2 h: 12,000 windows
EVENTS_PER_HOUR = 12


def part_data() -> dict:
    """Stays, windows, events and a completed, validated Oracle run."""
    setup_django()
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tests.exports.helpers import make_oracle_run, oracle_payload
    from windows.models import (
        Admission,
        DiseaseGroup,
        Domain,
        Event,
        EventKind,
        Outcome,
        Patient,
        Stay,
        Window,
    )

    started = time.perf_counter()
    rng = random.Random(7)
    admin = get_user_model().objects.create_superuser("bench", password="x")
    groups = [g for g in DiseaseGroup.values if g != "unknown"]
    base = datetime(2030, 1, 1, tzinfo=UTC)
    windows = []
    for s in range(STAYS):
        patient = Patient.objects.create(
            source="clif", source_id=f"p{s}", pseudo_id=f"B{s:08d}"
        )
        intime = base + timedelta(days=20 * s)
        admission = Admission.objects.create(
            patient=patient,
            source="clif",
            source_id=f"a{s}",
            admit_time=intime - timedelta(hours=6),
            discharge_time=intime + timedelta(days=15),
        )
        hours = WINDOWS_PER_STAY * 2 + 1
        stay = Stay.objects.create(
            admission=admission,
            source="clif",
            source_id=f"s{s}",
            intime=intime,
            outtime=intime + timedelta(hours=hours),
            hospital_outcome=rng.choice(Outcome.values),
            disease_group=rng.choice(groups),
        )
        Event.objects.bulk_create(
            Event(
                admission=admission,
                time=intime + timedelta(minutes=5 * i),
                kind=EventKind.ACTION if i % 6 == 0 else EventKind.OBSERVATION,
                domain=Domain.MED_CONTINUOUS if i % 6 == 0 else Domain.VITALS,
                category="norepinephrine" if i % 6 == 0 else "heart_rate",
                name="Norepinephrine" if i % 6 == 0 else "Heart rate",
                value_num=80 + i % 30,
                unit="bpm",
                source_table="bench",
            )
            for i in range(hours * EVENTS_PER_HOUR)
        )
        Event.objects.create(
            admission=admission,
            time=stay.outtime,
            kind=EventKind.OUTCOME,
            domain=Domain.OUTCOME,
            category="icu_discharge",
            name="ICU discharge",
            source_table="bench",
        )
        windows += Window.objects.bulk_create(
            Window(
                stay=stay,
                index=i,
                start=intime + timedelta(hours=2 * i),
                end=intime + timedelta(hours=2 * i, minutes=30),
                hours_since_admit=2.0 * i,
            )
            for i in range(WINDOWS_PER_STAY)
        )
    statuses = ["improving", "stable", "deteriorating"]
    # Validated with figures above the promotion gate's default thresholds:
    # the benchmark times the release build, not the Oracle's quality.
    run = make_oracle_run(
        admin=admin,
        name="bench",
        labels={
            w: (
                rng.choice(statuses),
                oracle_payload(
                    problems=texts_drawn(rng, PROBLEMS, 3),
                    actions=texts_drawn(rng, ACTIONS, 3),
                    flags=texts_drawn(rng, FLAGS, 2),
                ),
            )
            for w in windows
        },
    )
    return {
        "windows": len(windows),
        "events": Event.objects.count(),
        "run_id": run.pk,
        "seconds": time.perf_counter() - started,
    }


def part_build(run_id: str) -> dict:
    setup_django()
    from django.contrib.auth import get_user_model

    from exports.building import release_build
    from exports.services import release_create
    from oracle.models import OracleRun

    admin = get_user_model().objects.get(username="bench")
    run = OracleRun.objects.get(pk=int(run_id))
    started, started_cpu = time.perf_counter(), time.process_time()
    release = release_build(
        release=release_create(user=admin, kind="scale", oracle_run=run)
    )
    seconds = time.perf_counter() - started
    cpu = time.process_time() - started_cpu
    folder = Path(os.environ["REALICU_RELEASES_DIR"]) / release.directory
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return {
        "release_id": release.pk,
        "windows": release.window_count,
        "context_events": release.manifest["counts"]["context_events"],
        "megabytes": size / 1e6,
        "seconds": seconds,
        "cpu": cpu,
        "peak_mb": peak_mb(),
    }


GOLD_WINDOWS = 160
GOLD_PHYSICIANS = 3
GOLD_BUILDS = 6  # in one process: the first, then five warm
GOLD_COMMANDS = 5


def part_gold_data(windows: str = str(GOLD_WINDOWS)) -> dict:
    """The CLIF demo with its windows, a Gold campaign of its first
    ``windows`` Gold windows (0: all) for three physicians, their submitted
    labels and the consensus."""
    setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from windows.importers.clif import clif_import
    from windows.models import Stay, Window
    from windows.windowing import windows_build_many

    started = time.perf_counter()
    clif_import()
    windows_build_many(stays=Stay.objects.all(), seed=0)
    sampled = Window.objects.filter(sampled_gold=True).order_by("stay_id", "index")
    gold = list(sampled[: int(windows)] if int(windows) else sampled)
    _, campaign = agreed_gold_campaign(
        gold,
        name="bench gold",
        physicians=GOLD_PHYSICIANS,
        problems=PROBLEMS,
        actions=ACTIONS,
        flags=FLAGS,
    )
    return {
        "windows": len(gold),
        "campaign_id": campaign.pk,
        "seconds": time.perf_counter() - started,
    }


def part_gold_build(campaign_id: str) -> dict:
    """Builds of the campaign's Gold release in one fresh process, each its
    wall and CPU time (this process's; the database's aside): the first pays
    for what a process loads once, the others do not."""
    setup_django()
    from django.contrib.auth import get_user_model

    from annotation.models import Campaign
    from exports.building import release_build
    from exports.services import release_create

    admin = get_user_model().objects.get(username="bench")
    campaign = Campaign.objects.get(pk=int(campaign_id))
    wall, cpu = [], []
    for _ in range(GOLD_BUILDS):
        started, started_cpu = time.perf_counter(), time.process_time()
        release = release_build(
            release=release_create(user=admin, kind="gold", campaign=campaign)
        )
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        assert release.state == "ready", release.error
    return {"windows": release.window_count, "wall": wall, "cpu": cpu}


def _gold_command(env: dict, campaign_id: int) -> tuple[float, float, float]:
    """Wall and CPU time (user + system) of ``manage.py build_release`` for the
    campaign, start-up included, and the PostgreSQL server's CPU meanwhile
    (its postmaster's tree on this machine; 0.0 when it runs elsewhere)."""
    server = postgres_server_pid()
    server_before = tree_cpu(server) if server else 0.0
    out, seconds, cpu = command_timed(
        [
            sys.executable,
            "manage.py",
            "build_release",
            "--campaign",
            str(campaign_id),
            "--user",
            "bench",
        ],
        env,
    )
    if out.returncode:
        raise SystemExit(f"build_release failed:\n{out.stderr[-3000:]}")
    database = (tree_cpu(server) - server_before) if server else 0.0
    return seconds, cpu, database


def _figures(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s, min {min(values):.3f} s"


def _per_window(values: list[float], windows: int) -> str:
    return f"{1000 * statistics.median(values) / max(windows, 1):.2f} ms per window"


def gold(env: dict, windows: int) -> None:
    data = part_run(__file__, "gold_data", env, str(windows))
    print(
        f"gold data: {data['windows']} Gold windows, {GOLD_PHYSICIANS} physicians' "
        f"labels and consensus ({data['seconds']:.1f} s to generate)"
    )
    build = part_run(__file__, "gold_build", env, str(data["campaign_id"]))
    print(
        f"gold build ({build['windows']} windows), first in a fresh process: "
        f"{build['wall'][0]:.3f} s wall, {build['cpu'][0]:.3f} s CPU; the next "
        f"{GOLD_BUILDS - 1}: wall {_figures(build['wall'][1:])}; CPU "
        f"{_figures(build['cpu'][1:])} (target < 0.5 s); CPU "
        f"{_per_window(build['cpu'][1:], build['windows'])}; {load()}"
    )
    runs = [_gold_command(env, data["campaign_id"]) for _ in range(GOLD_COMMANDS)]
    print(
        f"gold manage.py build_release, {GOLD_COMMANDS} runs: wall "
        f"{_figures([w for w, _, _ in runs])}; CPU "
        f"{_figures([c for _, c, _ in runs])} (target < 2 s); CPU "
        f"{_per_window([c for _, c, _ in runs], build['windows'])}, all its "
        f"processes; with the PostgreSQL server's CPU meanwhile "
        f"({_figures([d for _, _, d in runs])}"
        + ("" if postgres_server_pid() else ": not on this machine, not counted")
        + f"): {_per_window([c + d for _, c, d in runs], build['windows'])} "
        f"(target <= 2 ms); {load()}"
    )


def scale(env: dict, tmp: Path) -> None:
    data = part_run(__file__, "data", env)
    print(
        f"data: {data['windows']} windows, {data['events']} events "
        f"({data['seconds']:.1f} s to generate)"
    )
    build = part_run(__file__, "build", env, str(data["run_id"]))
    print(
        f"build: {build['windows']} windows, {build['context_events']} context "
        "events, "
        f"{build['megabytes']:.1f} MB in {build['seconds']:.1f} s wall, "
        f"{build['cpu']:.1f} s CPU, peak {build['peak_mb']:.0f} MB; {load()}"
    )
    predictions = str(tmp / "predictions.jsonl")
    part_run(__file__, "predictions", env, str(build["release_id"]), predictions)
    for label in ("cold", "warm"):
        score = part_run(__file__, "score", env, str(build["release_id"]), predictions)
        print(
            f"scoring ({label} cache): {score['seconds']:.1f} s wall, "
            f"{score['cpu']:.1f} s CPU (validation "
            f"{score['validation_seconds']:.1f} s), "
            f"{score['texts']} unique texts, {score['texts_embedded']} embedded, "
            f"peak {score['peak_mb']:.0f} MB; problems Hit@5 "
            f"{score['problems_hit_at_5']:.3f}, HRR@5 "
            f"{score['actions_hrr_at_5']:.3f}; {load()}"
        )


def part_predictions(release_id: str, path: str) -> dict:
    setup_django()
    from exports.models import ReleaseWindow

    rng = random.Random(11)
    statuses = ["improving", "stable", "deteriorating"]
    count = predictions_write(
        path,
        ReleaseWindow.objects.filter(release_id=int(release_id))
        .values_list("window_id", flat=True)
        .iterator(),
        lambda: {
            "status": rng.choice(statuses),
            "acute_problems": texts_drawn(rng, PROBLEMS, 5),
            "recommended_actions": texts_drawn(rng, ACTIONS, 5),
        },
    )
    return {"predictions": count}


def predictions_scored(release, path: str, matcher) -> dict:
    """The prediction file at ``path`` validated (a message fails the bench)
    and scored at k = 5 with ``matcher``: the validation's seconds and the
    scores' figures."""
    from exports.scoring import predictions_check, predictions_read, scores_compute

    started = time.perf_counter()
    with open(path, "rb") as handle:
        messages, _ = predictions_check(lines=handle, release=release)
    assert not messages, messages[:3]
    validated = time.perf_counter() - started
    scores = scores_compute(
        release=release,
        predictions=list(predictions_read(Path(path))),
        k=5,
        matcher=matcher,
    )
    return {
        "validation_seconds": validated,
        "texts": scores["texts"],
        "texts_embedded": scores["texts_embedded"],
        "problems_hit_at_5": scores["overall"]["problems_hit_at_k"],
        "actions_hrr_at_5": scores["overall"]["actions_hrr_at_k"],
    }


def part_score(release_id: str, path: str) -> dict:
    setup_django()
    from exports.models import Release
    from exports.scoring import release_matcher

    release = Release.objects.get(pk=int(release_id))
    started, started_cpu = time.perf_counter(), time.process_time()
    figures = predictions_scored(release, path, release_matcher(release))
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - started_cpu,
        **figures,
        "peak_mb": peak_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part")
    parser.add_argument("--db", default=pg.database_name("release_bench"))
    parser.add_argument("--only", choices=("gold", "scale"))
    parser.add_argument(
        "--gold-windows",
        type=int,
        default=GOLD_WINDOWS,
        help=f"Gold windows of the demo to release (0: all; default {GOLD_WINDOWS})",
    )
    options = part_options(
        parser,
        {
            "data": part_data,
            "gold_data": part_gold_data,
            "gold_build": part_gold_build,
            "build": part_build,
            "predictions": part_predictions,
            "score": part_score,
        },
    )
    if options is None:
        return
    report_at_exit()
    try:
        for part in ("gold", "scale"):
            if options.only in (None, part):
                pg.database_create(options.db)
                with tempfile.TemporaryDirectory() as tmp:
                    env = part_environment(pg.database_url(options.db), Path(tmp))
                    if part == "gold":
                        gold(env, options.gold_windows)
                    else:
                        scale(env, Path(tmp))
    finally:
        if not options.keep:
            pg.database_drop(options.db)


if __name__ == "__main__":
    main()
