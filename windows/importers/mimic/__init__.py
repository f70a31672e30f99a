"""MIMIC-IV importer: a MIMIC-IV v2.x folder (``hosp/``, ``icu/``) into patients,
admissions, ICU stays and their events in CLIF's vocabulary, in batches of stays,
streaming each event file once, in chunks, so that memory does not grow with its
size; optionally only a cohort of its stays, chosen first from the small tables
(``selection``), their rows routed to their batch in the one pass (``routing``)."""

from windows.importers.mimic.chartevents import ChartEventsStep
from windows.importers.mimic.events import EventStep
from windows.importers.mimic.importing import mimic_import

__all__ = ["ChartEventsStep", "EventStep", "mimic_import"]
