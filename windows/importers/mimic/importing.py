"""The MIMIC-IV import: every file checked before anything is written, then the new
admissions imported in batches, each in one transaction."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from jobs.progress import Progress
from windows.actions import actions_derive
from windows.datasources import MIMIC_IV, MIMIC_IV_NOTE, stays_link
from windows.importers.base import ImportSummary, SourceDataError
from windows.importers.mimic.chartevents import ChartEventsStep, _chartevents
from windows.importers.mimic.events import UNTIMED, EventStep
from windows.importers.mimic.items import ItemLabels
from windows.importers.mimic.labs import LabEventsStep, _labevents, _microbiologyevents
from windows.importers.mimic.medications import (
    EmarStep,
    InputEventsStep,
    _emar,
    _inputevents,
    _prescriptions,
)
from windows.importers.mimic.notes import note_steps
from windows.importers.mimic.patients_admissions_stays import (
    NO_HADM_OUTSIDE,
    _read_cohort,
    _read_diagnoses,
    _write_cohort,
)
from windows.importers.mimic.reading import (
    ADMISSIONS,
    CHARTEVENTS,
    DATETIMEEVENTS,
    EMAR,
    EMAR_DETAIL,
    HCPCSEVENTS,
    INPUTEVENTS,
    LABEVENTS,
    MICROBIOLOGYEVENTS,
    OUTPUTEVENTS,
    PRESCRIPTIONS,
    PROCEDUREEVENTS,
    PROCEDURES_ICD,
    TRANSFERS,
    MimicFolder,
    TableSpec,
)
from windows.importers.mimic.records import (
    TransfersStep,
    _datetimeevents,
    _hcpcsevents,
    _outputevents,
    _procedureevents,
    _procedures_icd,
    _transfers,
)
from windows.importers.mimic.routing import Router
from windows.importers.mimic.selection import (
    check_stay_ids,
    draw_stays,
    read_stay_ids,
)
from windows.importers.mimic_mapping import TEMPERATURE_SITE_ITEM
from windows.importers.writing import EventStatistics, EventWriter
from windows.models import Admission, Source, Stay


def _event_steps(
    folder: MimicFolder, labels: ItemLabels, summary: ImportSummary
) -> list[EventStep]:
    """The event files present, their columns checked before anything is written.
    Labs and cultures without hadm_id are placed by their sample time."""
    steps: list[EventStep] = []

    def add(
        spec: TableSpec,
        transform: Callable,
        assign_by: tuple[str, ...] = (),
        step: type[EventStep] = EventStep,
        **options,
    ) -> None:
        table = folder.table(spec)
        if table is None:
            summary.notes.append(f"{spec.display} not found: no {spec.name} events")
            return
        steps.append(
            step(
                spec,
                table,
                folder.columns(table, spec),
                transform,
                assign_by=assign_by,
                **options,
            )
        )

    add(CHARTEVENTS, _chartevents(labels), step=ChartEventsStep, labels=labels)
    add(LABEVENTS, _labevents(labels), ("charttime",), step=LabEventsStep)
    add(INPUTEVENTS, _inputevents(labels), step=InputEventsStep)
    add(OUTPUTEVENTS, _outputevents(labels))
    add(PROCEDUREEVENTS, _procedureevents(labels))
    add(DATETIMEEVENTS, _datetimeevents(labels))
    emar = folder.table(EMAR)
    if emar is not None:
        detail = folder.table(EMAR_DETAIL)
        columns = folder.columns(detail, EMAR_DETAIL) if detail is not None else []
        if detail is None:
            summary.notes.append(
                f"{EMAR_DETAIL.display} not found: medication events have no dose"
            )
        steps.append(
            EmarStep(
                EMAR,
                emar,
                folder.columns(emar, EMAR),
                _emar,
                detail=detail,
                detail_columns=columns,
            )
        )
    elif folder.table(PRESCRIPTIONS) is not None:
        summary.notes.append(
            f"{EMAR.display} not found: medications from {PRESCRIPTIONS.display}"
        )
        add(PRESCRIPTIONS, _prescriptions)
    else:
        summary.notes.append(
            f"{EMAR.display} and {PRESCRIPTIONS.display} not found: no medication "
            "events"
        )
    add(MICROBIOLOGYEVENTS, _microbiologyevents, ("charttime", "chartdate"))
    add(TRANSFERS, _transfers, step=TransfersStep)
    add(PROCEDURES_ICD, _procedures_icd)
    add(HCPCSEVENTS, _hcpcsevents)
    # MIMIC-IV-Note's note/ folder, when present (windows.importers.mimic.notes).
    steps += note_steps(folder, summary)
    return steps


# --- the import --------------------------------------------------------------------


def _batches(
    stays: pd.DataFrame,
    hadm_ids: list[int],
    size: int,
    subjects: pd.Series | None = None,
) -> list[list[int]]:
    """Admissions in order, grouped so that each batch holds about ``size`` stays
    (an admission's stays are never split; with ``subjects``, hadm_id ->
    subject_id, nor a patient's admissions, which then follow each other)."""
    counts = stays["hadm_id"].value_counts()
    batches, current, n = [], [], 0
    for i, hadm in enumerate(hadm_ids):
        current.append(hadm)
        n += int(counts.get(hadm, 0))
        same_patient = (
            subjects is not None
            and i + 1 < len(hadm_ids)
            and subjects.loc[hadm_ids[i + 1]] == subjects.loc[hadm]
        )
        if n >= size and not same_patient:
            batches.append(current)
            current, n = [], 0
    if current:
        batches.append(current)
    return batches


@dataclass
class Prepared:
    """What an import knows before it writes anything: the folder read and
    checked, the admissions to import in batches, their diagnoses."""

    summary: ImportSummary
    folder: MimicFolder
    cohort: object  # patients_admissions_stays.PatientsAdmissionsStays
    labels: ItemLabels
    steps: list[EventStep]
    batches: list[list[int]]
    diagnoses: dict
    imported: int  # admissions to import
    wanted: set | None
    all_admissions: int

    def finish_notes(self) -> None:
        """The cohort-first note on what was imported, last in the summary."""
        if self.wanted is not None:
            self.summary.notes.append(
                f"cohort first: {self.imported} of {self.all_admissions} admissions "
                f"in {ADMISSIONS.display} imported with their events"
            )


def mimic_import(
    *,
    directory: Path,
    progress: Progress | None = None,
    batch_stays: int | None = None,
    cohort_size: int | None = None,
    seed: int = 0,
    stays_file: Path | None = None,
) -> ImportSummary:
    """Import a MIMIC-IV v2.x folder; admissions already imported are skipped.

    The small tables (patients, admissions, icustays) are validated completely and
    the columns of every event file checked before anything is written. The new
    admissions with an ICU stay are then imported in batches of about
    ``batch_stays`` stays (default ``REALICU_IMPORT_BATCH_STAYS``), each batch in
    one transaction: patients, admissions, stays and outcome events, then every
    event file streamed once. An error rolls back the batch it occurs in;
    batches already committed stay, and a re-run skips them.

    Cohort first: with ``cohort_size`` (drawn from ``seed`` as cohort_build
    draws, windows.importers.mimic.selection) or ``stays_file`` (stay_ids), only
    those stays, their admissions and their admissions' events are imported.
    With more than one batch, each event file is still read once: its rows are
    routed to their batch first (windows.importers.mimic.routing).
    """
    progress = progress or Progress()
    plan = mimic_prepare(
        directory=directory,
        batch_stays=batch_stays,
        cohort_size=cohort_size,
        seed=seed,
        stays_file=stays_file,
    )
    batches, steps = plan.batches, plan.steps
    progress.start(
        len(batches) * (len(steps) + 1), "MIMIC-IV: patients, admissions, stays"
    )
    with tempfile.TemporaryDirectory(prefix="realicu-mimic-") as spill:
        router = None
        if len(batches) > 1:
            router = _route(Path(spill), steps, batches, plan.cohort, progress)
        _import_batches(
            batches, steps, router, plan.cohort, plan.diagnoses, plan.summary, progress
        )
    _notes(steps, plan.labels, plan.summary)
    plan.finish_notes()
    return plan.summary


def mimic_prepare(
    *,
    directory: Path,
    batch_stays: int | None = None,
    cohort_size: int | None = None,
    seed: int = 0,
    stays_file: Path | None = None,
    by_patient: bool = False,
) -> Prepared:
    """Read and check the folder (mimic_import), choose the admissions to import
    and cut them into batches; nothing is written. With ``by_patient`` every
    admission of a patient falls in one batch, so that batches share no
    patient and may run at once (windows.importers.mimic.fanout)."""
    if batch_stays is None:
        batch_stays = settings.REALICU_IMPORT_BATCH_STAYS
    if batch_stays < 1:
        raise ValidationError("batch_stays must be at least 1.")
    if cohort_size is not None and stays_file is not None:
        raise ValidationError("Give a cohort size or a stays file, not both.")
    if cohort_size is not None and cohort_size < 1:
        raise ValidationError(f"Cohort size must be at least 1, not {cohort_size}.")
    summary = ImportSummary(source="MIMIC-IV")
    folder = MimicFolder(directory)
    wanted = read_stay_ids(stays_file) if stays_file is not None else None

    cohort = _read_cohort(folder)
    all_admissions = len(cohort.admissions)
    if wanted is not None:
        check_stay_ids(cohort, wanted, str(stays_file))
        summary.notes.append(
            f"cohort first: {len(wanted)} stays listed in {stays_file}"
        )
    elif cohort_size is not None:
        wanted, drawn = draw_stays(cohort, size=cohort_size, seed=seed)
        summary.notes.append(
            f"cohort first: {len(wanted)} of {drawn['eligible_stays']} eligible "
            f"stays drawn (seed {seed}, one per patient, strata "
            + ", ".join(f"{k} {v['selected']}" for k, v in drawn["strata"].items())
            + ")"
        )
    if wanted is not None:
        cohort.stays = cohort.stays[cohort.stays["stay_id"].isin(wanted)]
    labels = ItemLabels(folder, summary)
    steps = _event_steps(folder, labels, summary)
    # MIMIC-IV-Note is a PhysioNet project of its own, with its own agreement.
    summary.data_sources = [MIMIC_IV] + (
        [MIMIC_IV_NOTE] if any(step.spec.module == "note" for step in steps) else []
    )

    in_icu = pd.Index(cohort.stays["hadm_id"].unique())
    done = set(
        Admission.objects.filter(source=Source.MIMIC).values_list(
            "source_id", flat=True
        )
    )
    new = cohort.admissions.loc[[h for h in in_icu if str(h) not in done]]
    summary.skipped_admissions = len(in_icu) - len(new)
    without_icu = len(cohort.admissions) - len(in_icu)
    if without_icu and wanted is None:
        summary.notes.append(
            f"{ADMISSIONS.display}: {without_icu} admissions without an ICU stay not "
            f"imported, nor their events"
        )
    new = new.sort_values(["admittime"], kind="stable")
    cohort.first_admit = new.groupby("subject_id")["admittime"].min()
    order = [int(h) for h in new.index]
    if by_patient:  # each patient's admissions together, at its first's place
        first = new.groupby("subject_id", sort=False).ngroup()
        order = [int(h) for h in new.index[np.argsort(first.to_numpy(), kind="stable")]]
    batches = _batches(
        cohort.stays,
        order,
        batch_stays,
        subjects=new["subject_id"] if by_patient else None,
    )
    diagnoses = (
        _read_diagnoses(folder, new.index.to_numpy(), summary) if len(new) else {}
    )
    return Prepared(
        summary=summary,
        folder=folder,
        cohort=cohort,
        labels=labels,
        steps=steps,
        batches=batches,
        diagnoses=diagnoses,
        imported=len(new),
        wanted=wanted,
        all_admissions=all_admissions,
    )


def _route(spill: Path, steps, batches, cohort, progress) -> Router:
    """Every event file read once, its rows routed to their batch; an error here
    comes before anything is written."""
    hadm = [h for b in batches for h in b]
    router = Router(spill, batches, cohort.admissions.loc[hadm, "subject_id"])
    try:
        for position, step in enumerate(steps):
            router.route(position, step, progress)
    except ValidationError as exc:
        raise SourceDataError(
            "; ".join(exc.messages) + " (nothing was imported)"
        ) from exc
    return router


def _batch_planning() -> None:
    """Plan the batch's queries as what they are, on PostgreSQL: each reads the
    events of the batch's own admissions (temperature sites, blood-gas
    specimens, derived actions), which the (admission, time) index finds. The
    admissions are newer than any statistics, so the planner took them for a
    row or two and chose parallel sequential scans of the whole table (1.7 s at
    23 M events, growing with it) and JIT-compiled them (0.7 s a query). For
    this transaction only: sequential scans off, JIT off."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL jit = off")


def _import_batches(batches, steps, router, cohort, diagnoses, summary, progress):
    committed = 0
    statistics = EventStatistics()
    for number, hadm_ids in enumerate(batches, start=1):
        before = summary.total_events
        try:
            with transaction.atomic(), EventWriter() as writer:
                _batch_planning()
                batch = _write_cohort(hadm_ids, cohort, diagnoses, summary, writer)
                stays_link(
                    stay_ids=Stay.objects.filter(
                        admission_id__in=[int(a) for a in batch.admission_ids]
                    ).values_list("pk", flat=True),
                    keys=summary.data_sources,
                )
                progress.advance(
                    1, f"batch {number}/{len(batches)}: {len(hadm_ids)} admissions"
                )
                for position, step in enumerate(steps):
                    if router is not None:
                        router.tables(position, step, number - 1)
                    step.run(batch, writer, progress, summary)
                    progress.advance(
                        1, f"batch {number}/{len(batches)}: {step.name} done"
                    )
                writer.flush()
                summary.add_actions(
                    actions_derive(admission_ids=[int(a) for a in batch.admission_ids])
                )
        except ValidationError as exc:
            # Batches commit one by one (a full MIMIC-IV is too large for one
            # transaction): say exactly what stays, and that a re-run completes it.
            raise SourceDataError(
                "; ".join(exc.messages)
                + f" (batch {number} of {len(batches)} rolled back; "
                + (
                    f"{number - 1} earlier batch(es), {committed} admissions, were "
                    "imported and stay: running the import again skips them and "
                    "completes it)"
                    if committed
                    else "nothing was imported)"
                )
            ) from exc
        committed += len(hadm_ids)
        if number < len(batches):  # the next batch's queries plan on it
            statistics.committed(summary.total_events - before)


def _notes(steps, labels, summary) -> None:
    """Every source row that is no event of its own, by file and reason
    (ImportSummary.dropped), and the unknown items."""
    for step in steps:
        file = step.spec.display
        for reason, n in step.tally.counts.items():
            summary.add_dropped(file, reason, n)
        summary.add_dropped(file, NO_HADM_OUTSIDE, step.tally.outside())
        summary.add_dropped(file, UNTIMED, step.untimed)
        summary.add_dropped(
            file,
            "discharge rows (the admissions' hospital-discharge outcome events say it)",
            getattr(step, "discharges", 0),
        )
        summary.add_dropped(
            file,
            f"Temperature Site rows ({TEMPERATURE_SITE_ITEM}) without a temperature "
            "at their time",
            getattr(step, "lone_sites", 0),
        )
        summary.add_dropped(
            file,
            f"Temperature Site rows ({TEMPERATURE_SITE_ITEM}) merged into the "
            "temperature charted at their time (its site)",
            getattr(step, "merged_sites", 0),
        )
    summary.notes.extend(labels.unmapped.notes())
