"""What an import wrote, in a form two imports of one folder can be compared
by: counts, and one hash per stay over its patient, admission and events with
all their fields but the database's own ids (tests/windows/test_import_fanout.py,
benchmarks/import_fanout_bench.py)."""

from __future__ import annotations

import hashlib

from windows.models import Admission, Event, Patient, Stay

EVENT_FIELDS = [
    f.name for f in Event._meta.concrete_fields if f.name not in ("id", "admission")
]


def database_digest() -> dict:
    """Counts, and one hash per stay (by its source id) over its patient, its
    admission and every event of the admission with all their fields but the
    database's own ids: two imports of one folder give equal digests."""
    stays = {}
    for stay in Stay.objects.select_related("admission__patient").order_by("source_id"):
        a, p = stay.admission, stay.admission.patient
        events = sorted(
            repr(row)
            for row in Event.objects.filter(admission=a).values_list(*EVENT_FIELDS)
        )
        record = (
            (p.source_id, p.pseudo_id, p.sex, p.age, p.death_time),
            (a.source_id, a.admit_time, a.discharge_time, a.discharge_disposition),
            (a.admission_type, a.age_at_admission, a.diagnoses),
            (stay.source_id, stay.source_ids, stay.care_unit, stay.intime),
            (stay.outtime, stay.hospital_outcome),
            sorted(stay.data_sources.values_list("key", flat=True)),
            events,
        )
        stays[stay.source_id] = hashlib.sha256(repr(record).encode()).hexdigest()
    return {
        "patients": Patient.objects.count(),
        "admissions": Admission.objects.count(),
        "stays": Stay.objects.count(),
        "events": Event.objects.count(),
        "actions": Event.objects.filter(kind="action").count(),
        "per_stay": stays,
    }
