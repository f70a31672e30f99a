"""MIMIC-IV-Note: radiology reports and discharge summaries (issue 21).

The module is optional: its files live in ``note/`` next to ``hosp/`` and ``icu/``
(MIMIC-IV-Note ships as a module of its own); without them nothing changes.

Radiology reports are bedside events of the admission (domain ``notes``, kind
observation, category ``radiology_report``), named by the exam
(radiology_detail's ``exam_name``), their text the FINDINGS and IMPRESSION
sections of the report, findings first. Their time is **storetime** where the
row has one, else charttime: in MIMIC-IV-Note charttime is when the exam was
done, storetime when the signed report was stored, and a clinician can only read
a report once it is stored (the paper's rule: a context holds what a clinician
could have seen at that moment). Rows without hadm_id (outpatient or ED exams)
are placed in the subject's admission whose admit-to-discharge span holds their
charttime, as labs and cultures are.

Discharge summaries are hindsight only: kind ``outcome`` and category
``discharge_summary`` (windows.selectors_context: both keep them out of every
bedside, release and agent context), at their charttime (storetime if missing),
their whole text kept; pages and the Oracle show them marked as written at
discharge.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from windows.importers.base import ImportSummary
from windows.importers.mimic.events import DetailStep, EventStep, _events
from windows.importers.mimic.reading import CHUNK_ROWS, TableSpec, _Columns, _keys
from windows.models import Domain, EventKind

RADIOLOGY = TableSpec(
    "note",
    "radiology",
    ("note_id", "subject_id", "hadm_id", "charttime", "text"),
    ("note_type", "note_seq", "storetime"),
)
RADIOLOGY_DETAIL = TableSpec(
    "note",
    "radiology_detail",
    ("note_id", "field_name", "field_value"),
    ("subject_id", "field_ordinal"),
)
DISCHARGE = TableSpec(
    "note",
    "discharge",
    ("note_id", "subject_id", "hadm_id", "charttime", "text"),
    ("note_type", "note_seq", "storetime"),
)

RADIOLOGY_CATEGORY = "radiology_report"
DISCHARGE_CATEGORY = "discharge_summary"

# A radiology report's stored text at most this long (a findings section is a few
# hundred to two thousand characters; a whole report kept for want of sections
# can be much longer). Longer text is cut with TRUNCATION_MARK.
MAX_REPORT_CHARS = 6000
TRUNCATION_MARK = "[…truncated]"

# Section headings of MIMIC-IV-Note radiology reports. A heading starts a line
# and ends with a colon, in any case and with any spacing ("FINDINGS:",
# "Findings :", "  IMPRESSION:"); only these names count as headings, so a line
# of the findings such as "Heart size: normal" stays in its section.
_HEADINGS = (
    "examination",
    "exam",
    "indication",
    "history",
    "clinical history",
    "clinical information",
    "reason for exam",
    "reason for examination",
    "technique",
    "comparison",
    "comparisons",
    "findings",
    "impression",
    "impressions",
    "conclusion",
    "conclusions",
    "recommendation",
    "recommendations",
    "recommendation(s)",
    "notification",
    "wet read",
    "procedure",
    "dose",
    "addendum",
    "final report",
    "contrast",
)
_HEADING_RE = re.compile(
    r"^[ \t]*("
    + "|".join(re.escape(h).replace(r"\ ", r"[ \t]+") for h in _HEADINGS)
    + r")[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
_KEPT = {
    "findings": "FINDINGS",
    "impression": "IMPRESSION",
    "impressions": "IMPRESSION",
}


def _squash(text: str) -> str:
    return " ".join(text.split())


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(TRUNCATION_MARK) - 1)
    return text[:keep].rstrip() + " " + TRUNCATION_MARK


def report_findings(text: str, *, limit: int = MAX_REPORT_CHARS) -> str:
    """The FINDINGS and IMPRESSION sections of a radiology report, findings
    first, each as ``"FINDINGS: ..."`` with its whitespace collapsed; a section
    given twice (an addendum's) is joined in order. A report with neither
    section gives its whole text, collapsed. Cut at ``limit`` characters with
    TRUNCATION_MARK."""
    text = text or ""
    marks = list(_HEADING_RE.finditer(text))
    sections: dict[str, list[str]] = {}
    for i, mark in enumerate(marks):
        name = _KEPT.get(" ".join(mark.group(1).lower().split()))
        if name is None:
            continue
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = _squash(text[mark.end() : end])
        if body:
            sections.setdefault(name, []).append(body)
    if sections:
        parts = [
            f"{name}: {' '.join(sections[name])}"
            for name in ("FINDINGS", "IMPRESSION")
            if name in sections
        ]
        out = " ".join(parts)
    else:
        out = _squash(text)
    return truncate(out, limit)


def _note_times(col: _Columns, *, report: bool) -> pd.Series:
    charttime = col.time("charttime")
    storetime = col.time("storetime")
    if report:
        return storetime.fillna(charttime)
    return charttime.fillna(storetime)


def _radiology(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """A report per row, at storetime (else charttime); name and exam are filled
    from radiology_detail by RadiologyStep."""
    col = _Columns(f, file, f["_row"].to_numpy())
    note_type = col.text("note_type").astype(str)
    texts = col.text("text").astype(str).map(report_findings)
    name = np.where(note_type == "AR", "Radiology report addendum", "Radiology report")
    return _events(
        f,
        "radiology",
        time=_note_times(col, report=True),
        kind=EventKind.OBSERVATION.value,
        domain=Domain.NOTES.value,
        category=RADIOLOGY_CATEGORY,
        name=name,
        value_text=texts,
        source_key=_keys(f["note_id"]),
    )


def _discharge(f: pd.DataFrame, file: str) -> pd.DataFrame:
    """A discharge summary per row, whole, as a hindsight record."""
    col = _Columns(f, file, f["_row"].to_numpy())
    return _events(
        f,
        "discharge",
        time=_note_times(col, report=False),
        kind=EventKind.OUTCOME.value,
        domain=Domain.NOTES.value,
        category=DISCHARGE_CATEGORY,
        name="Discharge summary",
        value_text=col.text("text").astype(str).str.strip(),
        source_key=_keys(f["note_id"]),
    )


# Rows per chunk of a notes file, about 15 MB of text each: a report is about
# 1.5 kB and a discharge summary 10 kB, so the 250,000 rows of the other files
# would hold gigabytes.
REPORT_CHUNK_ROWS = 10_000
DISCHARGE_CHUNK_ROWS = 1_500


class DischargeStep(EventStep):
    chunk_rows = DISCHARGE_CHUNK_ROWS


class RadiologyStep(DetailStep):
    """radiology, each report named by its exam (radiology_detail's exam_name)
    when that file is there."""

    chunk_rows = REPORT_CHUNK_ROWS

    def with_detail(self, events: pd.DataFrame) -> pd.DataFrame:
        """The exam name of each report: its first exam_name row (by
        field_ordinal where the file has it), read in chunks."""
        wanted = set(events["source_key"])
        found = []
        for _, chunk in self.detail.chunks(self.detail_columns, chunksize=CHUNK_ROWS):
            chunk = chunk[
                (chunk["field_name"] == "exam_name")
                & chunk["note_id"].isin(wanted)
                & chunk["field_value"].notna()
            ]
            if len(chunk):
                found.append(chunk)
        if not found:
            return events
        names = pd.concat(found)
        if "field_ordinal" in names:
            order = pd.to_numeric(names["field_ordinal"], errors="coerce")
            names = names.assign(_o=order).sort_values("_o", kind="stable")
        exam = names.drop_duplicates("note_id").set_index("note_id")["field_value"]
        exam = exam.reindex(events["source_key"].to_numpy())
        has = exam.notna().to_numpy()
        addendum = events["name"].to_numpy() == "Radiology report addendum"
        label = exam.astype(str).str.strip().str.slice(0, 240).to_numpy()
        events.loc[has, "name"] = np.where(
            addendum[has], "Addendum: " + label[has], label[has]
        )
        return events


def note_steps(folder, summary: ImportSummary) -> list[EventStep]:
    """The steps of the note/ files present, their columns checked. Without a
    note/ folder: none, and nothing said (most sites have no notes)."""
    steps: list[EventStep] = []
    if not (folder.directory / "note").is_dir():
        return steps
    radiology = folder.table(RADIOLOGY)
    if radiology is not None:
        detail = folder.table(RADIOLOGY_DETAIL)
        columns = folder.columns(detail, RADIOLOGY_DETAIL) if detail else []
        if detail is None:
            summary.notes.append(
                f"{RADIOLOGY_DETAIL.display} not found: radiology reports are not "
                "named by their exam"
            )
        steps.append(
            RadiologyStep(
                RADIOLOGY,
                radiology,
                folder.columns(radiology, RADIOLOGY),
                _radiology,
                assign_by=("charttime",),
                detail=detail,
                detail_columns=columns,
            )
        )
    else:
        summary.notes.append(f"{RADIOLOGY.display} not found: no radiology reports")
    discharge = folder.table(DISCHARGE)
    if discharge is not None:
        steps.append(
            DischargeStep(
                DISCHARGE, discharge, folder.columns(discharge, DISCHARGE), _discharge
            )
        )
    else:
        summary.notes.append(f"{DISCHARGE.display} not found: no discharge summaries")
    return steps


__all__ = [
    "DISCHARGE",
    "DISCHARGE_CATEGORY",
    "MAX_REPORT_CHARS",
    "RADIOLOGY",
    "RADIOLOGY_CATEGORY",
    "RADIOLOGY_DETAIL",
    "TRUNCATION_MARK",
    "note_steps",
    "report_findings",
    "truncate",
]
