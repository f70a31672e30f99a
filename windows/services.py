"""Writes on clinical data shared by every importer: pseudonyms, stay outcome and
disease group, the outcome-revealing events, and import runs."""
from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pandas as pd
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from windows.disease_groups import disease_group, first_ranked
from windows.vocabulary import diagnosis_label
from windows.models import (
    Admission,
    DiseaseGroup,
    Domain,
    EventKind,
    ImportRun,
    ImportStatus,
    Outcome,
    Patient,
    Source,
    Stay,
)

EXPIRED_WORDS = ("expired", "died", "death")
# A death recorded this long after discharge still counts as in-hospital: source
# death times are often charted at day granularity.
DEATH_GRACE = timedelta(hours=24)


def patient_pseudo_id(*, source: str, source_id: str) -> str:
    """A stable pseudonymous id; the source id cannot be read back from it."""
    salt = getattr(settings, "REALICU_PSEUDONYM_SALT", "") or settings.SECRET_KEY
    digest = hmac.new(salt.encode(), f"{source}:{source_id}".encode(), hashlib.sha256)
    return "P" + digest.hexdigest()[:10].upper()


def admission_died(*, admission: Admission, death_time) -> bool:
    """Death in hospital: a disposition that says so, or a death time no later than
    discharge (plus a day's grace)."""
    disposition = (admission.discharge_disposition or "").lower()
    if any(word in disposition for word in EXPIRED_WORDS):
        return True
    if death_time is None or admission.discharge_time is None:
        return False
    return admission.admit_time <= death_time <= admission.discharge_time + DEATH_GRACE


def stay_diagnosis_fields(*, admission: Admission) -> dict:
    """Admission diagnosis and disease group from the first-ranked ICD code of the
    stay's admission: the code recorded nearest the ICU admission. The label is
    the code with its title (the source's, else the CMS tables'), so pages never
    show a bare code. Diagnoses are coded after discharge: hindsight readers see
    them, bedside and release contexts do not."""
    dx = first_ranked(admission.diagnoses or [])
    if dx is None:
        return {
            "admission_diagnosis": "",
            "diagnosis_code": "",
            "diagnosis_version": None,
            "disease_group": DiseaseGroup.UNKNOWN,
        }
    group = disease_group(dx["code"], dx.get("version"))
    label = diagnosis_label(str(dx["code"]), dx.get("version"), dx.get("title") or "")
    return {
        "admission_diagnosis": label[:255],
        "diagnosis_code": str(dx["code"])[:16],
        "diagnosis_version": dx.get("version"),
        "disease_group": group,
    }


def merge_icu_segments(segments: list[tuple], tolerance=timedelta(0)) -> list[list[tuple]]:
    """Group ICU segments ``(in, out, ...)`` of one admission into stays: a segment
    that starts no later than the previous one ended (transfer between ICUs)
    continues the same stay, as MIMIC-IV's icustays does."""
    stays: list[list[tuple]] = []
    current_end = None
    for seg in sorted(segments, key=lambda s: s[0]):
        if stays and current_end is not None and seg[0] <= current_end + tolerance:
            stays[-1].append(seg)
            current_end = max(current_end, seg[1])
        else:
            stays.append([seg])
            current_end = seg[1]
    return stays


def outcome_events_frame(*, admissions: list[Admission], stays: list[Stay],
                         deaths: dict[int, object], source_table: str) -> pd.DataFrame:
    """The outcome-revealing events: ICU discharge of each stay, hospital discharge
    with its disposition, and death. They are hidden from any model under test."""
    rows = []
    for stay in stays:
        rows.append(
            {
                "admission_id": stay.admission_id,
                "time": stay.outtime,
                "kind": EventKind.OUTCOME,
                "domain": Domain.OUTCOME,
                "category": "icu_discharge",
                "name": "ICU discharge",
                "value_text": stay.care_unit,
                "source_table": source_table,
                "source_key": f"stay:{stay.source_id}",
            }
        )
    for adm in admissions:
        if adm.discharge_time is not None:
            rows.append(
                {
                    "admission_id": adm.pk,
                    "time": adm.discharge_time,
                    "kind": EventKind.OUTCOME,
                    "domain": Domain.OUTCOME,
                    "category": "hospital_discharge",
                    "name": "Hospital discharge",
                    "value_text": adm.discharge_disposition,
                    "source_table": source_table,
                    "source_key": f"admission:{adm.source_id}",
                }
            )
        death = deaths.get(adm.pk)
        if death is not None:
            rows.append(
                {
                    "admission_id": adm.pk,
                    "time": death,
                    "kind": EventKind.OUTCOME,
                    "domain": Domain.OUTCOME,
                    "category": "death",
                    "name": "Death",
                    "value_text": "",
                    "source_table": source_table,
                    "source_key": f"death:{adm.source_id}",
                }
            )
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
    return frame


def import_run_create(*, source: str, path: str = "", user=None) -> ImportRun:
    """Queue an import in the worker. ``path`` must lie under an allowed import root."""
    from windows.importers.paths import resolve_import_path
    from windows.tasks import import_run_execute_task

    if source not in Source.values:
        from django.core.exceptions import ValidationError

        raise ValidationError(f"Unknown source {source!r}; choose one of {', '.join(Source.values)}.")
    resolved = resolve_import_path(source=source, path=path)
    with transaction.atomic():
        run = ImportRun.objects.create(source=source, path=resolved, started_by=user)
        transaction.on_commit(lambda: import_run_execute_task.delay(run.pk))
    return run


def import_run_execute(*, import_run: ImportRun) -> ImportRun:
    """Run a queued import and keep its progress on the row. Idempotent: a run that
    is already done is left alone, and re-importing skips what exists. Whatever
    goes wrong ends on the row as FAILED with its message, never silently."""
    from pathlib import Path

    from windows.importers.base import Progress

    if import_run.status == ImportStatus.DONE:
        return import_run
    ImportRun.objects.filter(pk=import_run.pk).update(
        status=ImportStatus.RUNNING, started_at=timezone.now(), error=""
    )

    from windows.jobprogress import progress_clear, progress_set

    def to_cache(done: int, total: int, label: str) -> None:
        progress_set(kind="import", pk=import_run.pk, done=done, total=total, label=label)

    progress = Progress(sinks=[to_cache])
    try:
        if import_run.source == Source.CLIF:
            from windows.importers.clif import clif_import

            folder = Path(import_run.path) if import_run.path else None
            summary = clif_import(directory=folder, progress=progress)
        else:
            from windows.importers.mimic import mimic_import

            summary = mimic_import(directory=Path(import_run.path), progress=progress)
    except Exception as exc:
        message = "; ".join(exc.messages) if hasattr(exc, "messages") else repr(exc)
        ImportRun.objects.filter(pk=import_run.pk).update(
            status=ImportStatus.FAILED, finished_at=timezone.now(), error=message[:5000],
            progress_done=progress.done, progress_total=progress.total,
        )
        progress_clear(kind="import", pk=import_run.pk)
        raise
    ImportRun.objects.filter(pk=import_run.pk).update(
        status=ImportStatus.DONE, finished_at=timezone.now(), summary=summary.as_dict(),
        progress_done=progress.done, progress_total=progress.total,
        progress_label="done",
    )
    progress_clear(kind="import", pk=import_run.pk)
    import_run.refresh_from_db()
    return import_run


__all__ = [
    "Outcome",
    "Patient",
    "admission_died",
    "import_run_create",
    "import_run_execute",
    "merge_icu_segments",
    "outcome_events_frame",
    "patient_pseudo_id",
    "stay_diagnosis_fields",
]
