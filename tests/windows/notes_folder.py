"""A MIMIC-IV test folder with its MIMIC-IV-Note module, as the notes import
tests read it: the radiology reports' findings and impression, and where each
report and discharge summary belongs."""

from __future__ import annotations

from tests.windows.mimic_files import A1, A2, A_NO_ICU, mimic_tables, write_mimic
from tests.windows.notes_files import (
    detail_rows,
    discharge_text,
    radiology_row,
    radiology_text,
    write_notes,
)

FINDINGS = (
    "New bilateral airspace opacities with small bilateral pleural effusions. "
    "Heart size: mildly enlarged."
)
IMPRESSION = "Findings consistent with ARDS."


def mimic_with_notes(tmp_path, *, with_detail=True, radiology=None, discharge=None):
    """The MIMIC-IV test folder under ``tmp_path`` with its note module: by
    default A1's radiology reports (one stored late, one without an admission),
    reports of an admission without ICU and of an unknown patient, A2's with
    title-case headings, two discharge summaries and the radiology details."""
    directory = write_mimic(tmp_path / "mimic", mimic_tables())
    if radiology is None:
        radiology = [
            # Exam at 08:00, the report stored at 09:10: placed at 09:10.
            radiology_row(
                "10001-RR-1",
                10001,
                A1,
                "2151-03-02 08:00:00",
                "2151-03-02 09:10:00",
                radiology_text("CHEST (PORTABLE AP)", FINDINGS, IMPRESSION),
            ),
            # No hadm_id, during A1: placed in A1 by its time.
            radiology_row(
                "10001-RR-2",
                10001,
                "",
                "2151-03-03 14:00:00",
                "2151-03-03 15:00:00",
                radiology_text("CT HEAD W/O CONTRAST", "No hemorrhage.", "Normal."),
            ),
            # The admission without an ICU stay, and a subject not imported.
            radiology_row(
                "10001-RR-3",
                10001,
                A_NO_ICU,
                "2152-01-02 08:00:00",
                "2152-01-02 09:00:00",
                radiology_text("CHEST (PA AND LAT)", "Clear lungs.", "Normal."),
            ),
            radiology_row(
                "99999-RR-1",
                99999,
                "",
                "2151-03-02 08:00:00",
                "2151-03-02 09:00:00",
                radiology_text("CHEST (PA AND LAT)", "Clear lungs.", "Normal."),
            ),
            # A2's report with title-case headings.
            radiology_row(
                "10002-RR-1",
                10002,
                A2,
                "2161-05-02 10:00:00",
                "",
                radiology_text(
                    "CHEST (PORTABLE AP)",
                    "Left lower lobe consolidation.",
                    "Pneumonia.",
                    heading_style="title",
                ),
            ),
        ]
    if discharge is None:
        discharge = [
            {
                "note_id": "10001-DS-1",
                "subject_id": 10001,
                "hadm_id": A1,
                "note_type": "DS",
                "note_seq": 1,
                "charttime": "2151-03-10 00:00:00",
                "storetime": "2151-03-10 15:00:00",
                "text": discharge_text(died=True),
            },
            {
                "note_id": "10001-DS-2",
                "subject_id": 10001,
                "hadm_id": A_NO_ICU,
                "note_type": "DS",
                "note_seq": 1,
                "charttime": "2152-01-03 00:00:00",
                "storetime": "2152-01-03 12:00:00",
                "text": discharge_text(),
            },
        ]
    detail = [
        *detail_rows("10001-RR-1", 10001, "C11", "CHEST (PORTABLE AP)"),
        *detail_rows("10001-RR-2", 10001, "CT1", "CT HEAD W/O CONTRAST"),
        *detail_rows("10001-RR-3", 10001, "C12", "CHEST (PA AND LAT)"),
    ]
    write_notes(
        directory,
        radiology=radiology,
        detail=detail,
        discharge=discharge,
        with_detail=with_detail,
    )
    return directory
