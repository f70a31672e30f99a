"""Writes on clinical data shared by every importer: pseudonyms, stay outcome and
disease group, the outcome-revealing events, and import runs."""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from jobs.leases import (
    JobLeaseLost,
    job_claim,
    job_fail,
    job_heartbeat,
    job_release,
)
from jobs.models import OutboxMessage
from jobs.outbox import outbox_send
from jobs.registry import kind_for
from windows.disease_groups import disease_group, first_ranked
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
from windows.vocabulary import diagnosis_label

if TYPE_CHECKING:
    import pandas as pd

EXPIRED_WORDS = ("expired", "died", "death")
# A death recorded this long after discharge still counts as in-hospital: source
# death times are often charted at day granularity.
DEATH_GRACE = timedelta(hours=24)
IMPORT_TASK = "windows.tasks.import_run_execute_task"

logger = logging.getLogger(__name__)


def patient_pseudo_id(*, source: str, source_id: str) -> str:
    """A stable pseudonymous id; the source id cannot be read back from it."""
    salt = getattr(settings, "REALICU_PSEUDONYM_SALT", "") or settings.SECRET_KEY
    digest = hmac.new(salt.encode(), f"{source}:{source_id}".encode(), hashlib.sha256)
    return "P" + digest.hexdigest()[:10].upper()


def admission_events_touch(
    *, admission_ids=None, since_event_id: int | None = None
) -> int:
    """Bump ``events_version`` of the admissions whose events changed: those named,
    or (``since_event_id``) those holding an event with a higher id, i.e. added
    since that id was the highest (``events_high_water``). What the stored concept
    tracks' freshness is read from (windows.tracks.events_signature), so that no
    request counts an admission's events. Returns how many were bumped."""
    from django.db.models import F

    from windows.models import Event

    if since_event_id is not None:
        admission_ids = (
            Event.objects.filter(id__gt=since_event_id)
            .order_by()
            .values("admission_id")
            .distinct()
        )
    if admission_ids is None:
        return 0
    return Admission.objects.filter(pk__in=admission_ids).update(
        events_version=F("events_version") + 1
    )


def events_high_water() -> int:
    """The highest event id now (0 when none): pass it to admission_events_touch
    after a bulk write to bump exactly the admissions it added events to."""
    from django.db.models import Max

    from windows.models import Event

    return Event.objects.aggregate(m=Max("id"))["m"] or 0


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


def merge_icu_segments(
    segments: list[tuple], tolerance=timedelta(0)
) -> list[list[tuple]]:
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


def outcome_events_frame(
    *,
    admissions: list[Admission],
    stays: list[Stay],
    deaths: dict[int, object],
    source_table: str,
) -> pd.DataFrame:
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
    # pandas only for an import's frame: the web's pages import this module
    # without it (issue 35).
    import pandas as pd

    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
    return frame


IMPORT_JOB = "import"  # the JobKind registered in windows.apps


def _import_outbox_key(pk: int) -> str:
    # The key the reaper uses for this job too, so a message waiting is sent once.
    return f"job:{IMPORT_JOB}:{pk}"


def import_run_create(
    *, source: str, path: str = "", user=None, data_source: str = ""
) -> ImportRun:
    """Queue an import in the worker. ``path`` must lie under an allowed import root.
    The task goes through the outbox in the transaction that creates the row, so
    a broker that cannot be reached delays the import without losing it.

    The run records the data source it reads, with its data-use terms
    (windows.datasources): MIMIC-IV is MIMIC-IV (and MIMIC-IV-Note, added when
    the import finds note/); a CLIF folder is ``data_source``, by default the
    open CLIF demo for the demo and the site's own data for a folder."""
    from windows.datasources import (
        MIMIC_IV,
        clif_default_data_source,
        data_source_get,
    )
    from windows.importers.paths import resolve_import_path

    if source not in Source.values:
        raise ValidationError(
            f"Unknown source {source!r}; choose one of {', '.join(Source.values)}."
        )
    resolved = resolve_import_path(source=source, path=path)
    if source == Source.MIMIC:
        if data_source and data_source != MIMIC_IV:
            raise ValidationError(
                "A MIMIC-IV import reads MIMIC-IV (and MIMIC-IV-Note): its data "
                "source is not a choice."
            )
        data_source = MIMIC_IV
    elif not data_source:
        data_source = clif_default_data_source(resolved)
    chosen = data_source_get(data_source)
    with transaction.atomic():
        run = ImportRun.objects.create(source=source, path=resolved, started_by=user)
        run.data_sources.set([chosen])
        outbox_send(task=IMPORT_TASK, args=[run.pk], key=_import_outbox_key(run.pk))
    return run


def import_run_waiting_for_broker(*, import_run: ImportRun) -> bool:
    """True when sending the run's task failed (the broker was away) and the
    message waits in the outbox for the reaper."""
    return OutboxMessage.objects.filter(
        key=_import_outbox_key(import_run.pk), attempts__gt=0
    ).exists()


def import_run_start(
    *, source: str, path: str = "", user=None, data_source: str = ""
) -> tuple[ImportRun, bool]:
    """Queue an import (``import_run_create``); with it, whether its task waits
    in the outbox because the broker could not be reached
    (``import_run_waiting_for_broker``)."""
    run = import_run_create(
        source=source, path=path, user=user, data_source=data_source
    )
    return run, import_run_waiting_for_broker(import_run=run)


def import_run_execute(*, import_run: ImportRun) -> ImportRun:
    """Run a queued import, holding it under a lease with a heartbeat (jobs.leases)
    that writes the importer's progress onto the row. Idempotent: a run that is
    finished or held by a live worker is left alone, and re-importing skips what
    exists, so a run re-queued after its worker died completes by running again.
    A run cancelled meanwhile stops at its next progress step. Whatever goes
    wrong ends on the row as FAILED with its message, never silently.

    The row is written only by ``job_claim``, the heartbeat thread and
    ``job_release``, never inside the importer's transaction (a CLIF import's
    batches share one), which would lock the row against the heartbeat."""
    from pathlib import Path

    from jobs.progress import Progress
    from windows.import_batches import import_fanout_enabled, import_run_fan_out

    pk = import_run.pk
    lease = job_claim(model=ImportRun, pk=pk, extra={"error": "", "finished_at": None})
    if lease is None:
        import_run.refresh_from_db()
        return import_run

    failure: Exception | None = None
    summary = None
    high_water = events_high_water()
    with job_heartbeat(model=ImportRun, pk=pk, lease=lease) as heartbeat:
        progress = Progress(sinks=[heartbeat])
        try:
            if import_run.source == Source.CLIF:
                from windows.importers.clif import clif_import

                folder = Path(import_run.path) if import_run.path else None
                chosen = import_run.data_sources.values_list("key", flat=True)
                summary = clif_import(
                    directory=folder,
                    progress=progress,
                    data_source=chosen.first(),
                )
            elif import_fanout_enabled():
                # Its batches are jobs of their own; the last one ends the run.
                import_run_fan_out(
                    import_run=import_run, lease=lease, progress=progress
                )
                import_run.refresh_from_db()
                return import_run
            else:
                from windows.importers.mimic import mimic_import

                summary = mimic_import(
                    directory=Path(import_run.path), progress=progress
                )
        except JobLeaseLost:
            # Cancelled, or given to another worker: the row is no longer this
            # worker's to write.
            logger.warning("import run %s stopped: its lease was taken", pk)
            import_run.refresh_from_db()
            return import_run
        except Exception as exc:
            failure = exc

    # Whatever the importer added (a failed CLIF import added nothing: it is
    # one transaction) makes the stored tracks of those admissions stale.
    admission_events_touch(since_event_id=high_water)
    finished = {
        "finished_at": timezone.now(),
        "heartbeat_at": timezone.now(),
        "progress_done": progress.done,
        "progress_total": progress.total,
    }
    if failure is not None:
        job_fail(model=ImportRun, pk=pk, lease=lease, error=failure, **finished)
        raise failure
    job_release(
        model=ImportRun,
        pk=pk,
        lease=lease,
        status=ImportStatus.DONE,
        summary=summary.as_dict(),
        progress_label="done",
        **finished,
    )
    if summary.data_sources:
        from windows.datasources import data_source_get

        import_run.data_sources.add(*(data_source_get(k) for k in summary.data_sources))
    import_run.refresh_from_db()
    return import_run


def _require_admin(admin) -> None:
    from accounts.roles import user_is_admin

    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin may resume or cancel an import.")


def import_run_resume(*, admin, import_run: ImportRun) -> ImportRun:
    """Queue a failed, cancelled or stuck (running without a live worker) import
    again; its worker re-runs the folder, which skips what is already imported.
    A fresh start: the count of workers lost on it starts over."""
    _require_admin(admin)
    with transaction.atomic():
        run = ImportRun.objects.select_for_update().filter(pk=import_run.pk).first()
        if run is None:
            raise ValidationError("This import no longer exists.")
        if run.status == ImportStatus.DONE:
            raise ValidationError(
                f"Import {run.pk} is done: there is nothing to resume."
            )
        if run.status == ImportStatus.QUEUED:
            raise ValidationError(
                f"Import {run.pk} is already queued: it starts when a worker is free."
            )
        if not run.resumable:
            raise ValidationError(
                f"Import {run.pk} is running in worker {run.worker or '?'} (last "
                f"heartbeat {run.heartbeat_age_seconds} s ago): cancel it first."
            )
        ImportRun.objects.filter(pk=run.pk).update(
            **kind_for(ImportRun).resumed(admin.get_username(), timezone.now())
        )
        outbox_send(task=IMPORT_TASK, args=[run.pk], key=_import_outbox_key(run.pk))
    import_run.refresh_from_db()
    return import_run


def import_run_cancel(*, admin, import_run: ImportRun) -> ImportRun:
    """Cancel a queued or running import. Clearing the lease is what stops the
    worker: its heartbeat finds the lease gone and its next progress step raises
    (jobs.leases.JobLeaseLost). A CLIF import's transaction then rolls back and
    leaves nothing; a MIMIC-IV import keeps the batches it committed, and a
    resume completes it."""
    _require_admin(admin)
    with transaction.atomic():
        run = ImportRun.objects.select_for_update().filter(pk=import_run.pk).first()
        if run is None:
            raise ValidationError("This import no longer exists.")
        if not run.is_open:
            raise ValidationError(
                f"Import {run.pk} is {run.get_status_display().lower()}: only a queued "
                "or running import can be cancelled."
            )
        reason = f"Cancelled by {admin.get_username()}."
        ImportRun.objects.filter(pk=run.pk).update(
            status=ImportStatus.CANCELLED,
            lease="",
            finished_at=timezone.now(),
            error=reason,
            progress_label="cancelled",
        )
        from windows.import_batches import import_batches_cancel

        import_batches_cancel(run=run, reason=reason)
    import_run.refresh_from_db()
    return import_run


__all__ = [
    "Outcome",
    "Patient",
    "admission_died",
    "import_run_cancel",
    "import_run_create",
    "import_run_execute",
    "import_run_resume",
    "import_run_waiting_for_broker",
    "merge_icu_segments",
    "outcome_events_frame",
    "patient_pseudo_id",
    "stay_diagnosis_fields",
]
