"""A MIMIC-IV import fanned out on the workers (issue 36): the plan reads and
checks the folder and routes every event file's rows once to their batch
(windows.importers.mimic.routing), then writes each batch's rows, patients,
admissions, stays and diagnoses through Django's storage API under one prefix
(the object store, or a local folder without one: ``spill_store``). Each batch
then imports on its own from there (``mimic_batch_import``), in one
transaction, the rows of its patients only: batches share no patient, so they
run at once on any number of workers (windows.import_batches holds the jobs).

A batch still reads the folder's dictionaries (d_items, d_labitems) and its
event files' headers, which are small; every worker sees the import folder,
as for any import started from the page."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage
from django.db import transaction

from jobs.progress import Progress
from realicu_web.storage import (
    StoredFile,
    object_store,
    store_put,
    store_remove_prefix,
)
from windows.actions import actions_derive
from windows.datasources import stays_link
from windows.importers.base import ImportSummary, SourceDataError
from windows.importers.mimic.importing import (
    _batch_planning,
    _event_steps,
    _notes,
    _route,
    mimic_prepare,
)
from windows.importers.mimic.items import ItemLabels, Unmapped
from windows.importers.mimic.patients_admissions_stays import (
    PatientsAdmissionsStays,
    _write_cohort,
)
from windows.importers.mimic.reading import MimicFolder
from windows.importers.mimic.routing import ROW, SpillTable
from windows.importers.writing import EventStatistics, EventWriter
from windows.models import Stay

MANIFEST = "batch.json"
_FRAMES = ("patients", "admissions", "stays")


def spill_store() -> Storage:
    """Where batches' rows wait: the shared object store, or (the embedded
    default, one machine) a folder under ``REALICU_VAR_DIR``."""
    store = object_store()
    if store is not None:
        return store
    return FileSystemStorage(location=str(Path(settings.VAR_DIR) / "import-spill"))


@dataclass
class FanoutPlan:
    """The batches (hadm_ids each) and their keys' prefixes, and the run's own
    share of the summary: notes, rows no batch takes, data sources."""

    batches: list[list[int]]
    prefixes: list[str]
    summary: dict


def mimic_fanout_plan(
    *,
    directory: Path,
    prefix: str,
    progress: Progress | None = None,
    batch_stays: int | None = None,
) -> FanoutPlan:
    """Check the folder and store every batch under ``prefix`` (what an earlier
    attempt left there is removed first). Writes nothing to the database."""
    progress = progress or Progress()
    plan = mimic_prepare(directory=directory, batch_stays=batch_stays, by_patient=True)
    steps, batches = plan.steps, plan.batches
    progress.start(len(batches) + 1, "MIMIC-IV: rows routed to their batches")
    store = spill_store()
    store_remove_prefix(store, prefix)
    prefixes = [f"{prefix}/batch-{n}" for n in range(len(batches))]
    with tempfile.TemporaryDirectory(prefix="realicu-fanout-") as spill:
        spill = Path(spill)
        router = None
        if batches:
            router = _route(spill, steps, batches, plan.cohort, progress)
        progress.advance(1, "rows routed to their batches")
        details = {}
        for position, table in (router.details if router else {}).items():
            key = f"{prefix}/detail-{position}.parquet"
            store_put(store, key, table.path)
            details[str(position)] = key
        for number, hadm_ids in enumerate(batches):
            _store_batch(
                store,
                prefixes[number],
                router,
                number,
                hadm_ids,
                plan,
                details,
                spill,
            )
            progress.advance(1, f"batch {number + 1}/{len(batches)} stored")
    _notes(steps, plan.labels, plan.summary)
    plan.finish_notes()
    return FanoutPlan(
        batches=batches, prefixes=prefixes, summary=plan.summary.as_dict()
    )


def _store_batch(store, prefix, router, number, hadm_ids, plan, details, spill):
    cohort = plan.cohort
    adm = cohort.admissions.loc[hadm_ids]
    subjects = adm["subject_id"].unique()
    patients = cohort.patients.loc[subjects].copy()
    patients["death"] = cohort.deaths.reindex(patients.index)
    patients["first_admit"] = cohort.first_admit.reindex(patients.index)
    frames = {
        "patients": patients,
        "admissions": adm,
        "stays": cohort.stays[cohort.stays["hadm_id"].isin(hadm_ids)],
    }
    for name, frame in frames.items():
        local = spill / f"{number}-{name}.parquet"
        frame.to_parquet(local)
        store_put(store, f"{prefix}/{name}.parquet", local)
    rows = {}
    for position, spills in router.spills.items():
        if number in spills:
            key = f"{prefix}/rows-{position}.parquet"
            store_put(store, key, spills[number].path)
            rows[str(position)] = key
    manifest = {
        "hadm_ids": [int(h) for h in hadm_ids],
        "steps": [step.name for step in plan.steps],
        "rows": rows,
        "details": details,
        "data_sources": plan.summary.data_sources,
        "diagnoses": {str(h): plan.diagnoses.get(int(h), []) for h in hadm_ids},
    }
    key = f"{prefix}/{MANIFEST}"
    if store.exists(key):
        store.delete(key)
    store.save(key, ContentFile(json.dumps(manifest).encode()))


def _fetch(store: Storage, prefix: str, local: Path, key: str) -> Path:
    """Download ``key`` to ``local``; a missing object says which."""
    target = local / key.rsplit("/", 1)[-1]
    try:
        StoredFile(store, key).download(target)
    except Exception as exc:
        raise SourceDataError(
            f"the batch's stored file {key} cannot be read ({exc})"
        ) from exc
    return target


def _parquet(path: Path, key: str, columns: list[str]) -> None:
    """A stored file is a parquet file with ``columns``, or a clear error."""
    try:
        names = pq.read_schema(path).names
    except Exception as exc:
        raise SourceDataError(
            f"the batch's stored file {key} is not a readable parquet file ({exc})"
        ) from exc
    missing = [c for c in columns if c not in names]
    if missing:
        raise SourceDataError(
            f"the batch's stored file {key} lacks the columns {', '.join(missing)}"
        )


def _load_cohort(store, prefix, local) -> PatientsAdmissionsStays:
    frames = {}
    for name in _FRAMES:
        key = f"{prefix}/{name}.parquet"
        path = _fetch(store, prefix, local, key)
        _parquet(path, key, [])
        frames[name] = pd.read_parquet(path)
    patients = frames["patients"]
    return PatientsAdmissionsStays(
        patients=patients,
        admissions=frames["admissions"],
        stays=frames["stays"],
        deaths=patients["death"],
        first_admit=patients["first_admit"],
    )


def _load_manifest(store, prefix, local) -> dict:
    key = f"{prefix}/{MANIFEST}"
    path = _fetch(store, prefix, local, key)
    try:
        manifest = json.loads(path.read_text())
        for field in ("hadm_ids", "steps", "rows", "details", "diagnoses"):
            manifest[field]  # noqa: B018 - each must be there
    except (ValueError, KeyError, TypeError) as exc:
        raise SourceDataError(
            f"the batch's stored file {key} is not the batch's description ({exc})"
        ) from exc
    return manifest


def _point_steps(steps, manifest, store, prefix, local) -> None:
    """Each step reads the batch's stored rows instead of its source file."""
    names = [step.name for step in steps]
    if names != manifest["steps"]:
        raise SourceDataError(
            "the import folder's event files changed since the import was planned "
            f"({', '.join(manifest['steps'])} then, {', '.join(names)} now): "
            "start the import again"
        )
    for position, step in enumerate(steps):
        key = manifest["rows"].get(str(position))
        path = None
        if key is not None:
            path = _fetch(store, prefix, local, key)
            _parquet(path, key, [*step.columns, ROW])
        source = step.table
        step.table = SpillTable(path, source, step.columns, rows=True)
        detail_key = manifest["details"].get(str(position))
        if detail_key is not None:
            detail = _fetch(store, prefix, local, detail_key)
            _parquet(detail, detail_key, list(step.detail_columns))
            step.detail = SpillTable(
                detail, step.detail, step.detail_columns, rows=False
            )


def mimic_batch_import(
    *,
    directory: Path,
    prefix: str,
    progress: Progress | None = None,
    commit: Callable[[dict], None] | None = None,
) -> dict:
    """Import one stored batch in one transaction and return its share of the
    summary (``batch_result``). ``commit(result)`` runs last inside that
    transaction (the batch's done marker), so the batch's rows and its marker
    commit together or not at all. A stored file that is missing or malformed
    raises SourceDataError naming its key; nothing is written then."""
    progress = progress or Progress()
    store = spill_store()
    summary = ImportSummary(source="MIMIC-IV")
    folder = MimicFolder(directory)
    labels = ItemLabels(folder, summary)
    steps = _event_steps(folder, labels, summary)
    with tempfile.TemporaryDirectory(prefix="realicu-batch-") as local:
        local = Path(local)
        manifest = _load_manifest(store, prefix, local)
        cohort = _load_cohort(store, prefix, local)
        _point_steps(steps, manifest, store, prefix, local)
        hadm_ids = [int(h) for h in manifest["hadm_ids"]]
        diagnoses = {int(h): d for h, d in manifest["diagnoses"].items()}
        progress.start(len(steps) + 1, "patients, admissions, stays")
        statistics = EventStatistics()
        with transaction.atomic(), EventWriter() as writer:
            _batch_planning()
            batch = _write_cohort(hadm_ids, cohort, diagnoses, summary, writer)
            admission_ids = [int(a) for a in batch.admission_ids]
            stays_link(
                stay_ids=Stay.objects.filter(
                    admission_id__in=admission_ids
                ).values_list("pk", flat=True),
                keys=manifest.get("data_sources") or [],
            )
            progress.advance(1, "patients, admissions, stays")
            for step in steps:
                step.run(batch, writer, progress, summary)
                progress.advance(1, f"{step.name} done")
            writer.flush()
            summary.add_actions(actions_derive(admission_ids=admission_ids))
            summary.notes.clear()  # the run's notes are the plan's
            _notes(steps, labels, summary)
            result = batch_result(summary, labels.unmapped)
            if commit is not None:
                commit(result)
    # The next batches' queries plan on the rows this one added.
    statistics.committed(summary.total_events)
    return result


def batch_result(summary: ImportSummary, unmapped: Unmapped) -> dict:
    """A batch's share of the summary, with its unknown items for the notes."""
    result = summary.as_dict()
    result["unmapped"] = {
        table: {str(item): n for item, n in counts.items()}
        for table, counts in unmapped.rows.items()
    }
    result["unmapped_names"] = {str(k): v for k, v in unmapped.names.items()}
    return result


def summary_merge(run_summary: dict, results: list[dict]) -> dict:
    """The run's summary: its own notes and rows no batch took, with every
    batch's counts, events, actions, rows left out and unknown items summed."""
    merged = ImportSummary(source=run_summary.get("source", "MIMIC-IV"))
    merged.skipped_admissions = run_summary.get("skipped_admissions", 0)
    merged.notes = list(run_summary.get("notes", []))
    merged.data_sources = list(run_summary.get("data_sources", []))
    unmapped = Unmapped()
    for part in [run_summary, *results]:
        merged.patients += part.get("patients", 0)
        merged.admissions += part.get("admissions", 0)
        merged.stays += part.get("stays", 0)
        for table, n in part.get("events", {}).items():
            merged.add_events(table, n)
        merged.add_actions(part.get("actions", {}))
        for file, reasons in part.get("dropped", {}).items():
            for reason, n in reasons.items():
                merged.add_dropped(file, reason, n)
        names = part.get("unmapped_names", {})
        for table, counts in part.get("unmapped", {}).items():
            items = list(counts)
            unmapped.add(
                table,
                items,
                [counts[i] for i in items],
                pd.Series({int(k): v for k, v in names.items()}, dtype=object),
            )
    merged.notes.extend(unmapped.notes())
    return merged.as_dict()


def batch_files_remove(prefix: str) -> None:
    """Remove what a run stored for its batches (once it has ended)."""
    store_remove_prefix(spill_store(), prefix)


__all__ = [
    "FanoutPlan",
    "batch_files_remove",
    "mimic_batch_import",
    "mimic_fanout_plan",
    "spill_store",
    "summary_merge",
]
