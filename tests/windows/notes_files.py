"""MIMIC-IV-Note files generated for tests and benchmarks, shaped like the real
module: note/radiology.csv.gz, note/radiology_detail.csv.gz and
note/discharge.csv.gz with their real columns, reports in the real layout
(a FINAL REPORT header, EXAMINATION, INDICATION, TECHNIQUE, COMPARISON,
FINDINGS, IMPRESSION, de-identified ``___``), discharge summaries of a few
thousand characters (real ones average about ten)."""

from __future__ import annotations

import csv
import gzip
import io
import random
from pathlib import Path

NOTE_COLUMNS = (
    "note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text".split(",")
)
DETAIL_COLUMNS = "note_id,subject_id,field_name,field_value,field_ordinal".split(",")

EXAMS = (
    ("C11", "CHEST (PORTABLE AP)"),
    ("C12", "CHEST (PA AND LAT)"),
    ("CT1", "CT HEAD W/O CONTRAST"),
    ("CT2", "CT ABD & PELVIS WITH CONTRAST"),
    ("US1", "LIVER OR GALLBLADDER US (SINGLE ORGAN)"),
)
FINDINGS = (
    "Endotracheal tube terminates 4.5 cm above the carina. Enteric tube courses "
    "below the diaphragm with the tip out of view. Right internal jugular central "
    "venous catheter terminates in the mid SVC.",
    "There are new bilateral diffuse airspace opacities, worse at the bases, with "
    "small bilateral pleural effusions. Heart size is mildly enlarged. No "
    "pneumothorax.",
    "Lungs are clear. Cardiomediastinal silhouette is normal. No pleural effusion "
    "or pneumothorax is seen.",
    "Left lower lobe consolidation with air bronchograms. Moderate left pleural "
    "effusion, increased from prior.",
)
IMPRESSIONS = (
    "Lines and tubes in standard position.",
    "Findings consistent with ARDS or multifocal pneumonia in the appropriate "
    "clinical setting.",
    "No acute cardiopulmonary process.",
    "Left lower lobe pneumonia with parapneumonic effusion.",
)


def radiology_text(
    exam: str, findings: str, impression: str, *, heading_style: str = "upper"
) -> str:
    """A report in MIMIC-IV-Note's layout. ``heading_style`` "title" writes
    "Findings :" and "Impression:" (spacing and case as some reports have)."""
    if heading_style == "title":
        f_head, i_head = "Findings :", "Impression:"
    else:
        f_head, i_head = "FINDINGS:", "IMPRESSION:"
    return (
        "                                 FINAL REPORT\n"
        f"EXAMINATION:  {exam}\n\n"
        "INDICATION:  ___ year old woman with sepsis and hypoxemia, intubated  // "
        "ETT placement? Interval change?\n\n"
        "TECHNIQUE:  Single frontal view of the chest\n\n"
        "COMPARISON:  Chest radiograph from ___\n\n"
        f"{f_head} \n \n{findings}\n \n"
        f"{i_head} \n \n{impression}\n"
    )


def discharge_text(*, died: bool = False, rng: random.Random | None = None) -> str:
    """A discharge summary of the real layout, about 7,000-12,000 characters."""
    rng = rng or random.Random(0)
    course = " ".join(
        rng.choice(
            (
                "Patient was started on broad-spectrum antibiotics with vancomycin "
                "and cefepime after blood cultures were drawn.",
                "Norepinephrine was required for hypotension and weaned over 48 hours.",
                "She was intubated for hypoxemic respiratory failure and extubated "
                "on hospital day 4.",
                "Creatinine peaked at 2.8 and improved with fluids.",
                "Lactate cleared after resuscitation.",
            )
        )
        for _ in range(rng.randint(90, 160))
    )
    disposition = "Expired" if died else "Extended Care"
    return (
        " \nName:  ___                     Unit No:   ___\n \n"
        "Admission Date:  ___              Discharge Date:   ___\n \n"
        "Date of Birth:  ___             Sex:   F\n \n"
        "Service: MEDICINE\n \n"
        "Allergies: \nPenicillins\n \n"
        "Chief Complaint:\nfever, hypotension\n \n"
        "History of Present Illness:\n___ year old woman presenting with fever and "
        "confusion.\n \n"
        f"Brief Hospital Course:\n{course}\n \n"
        f"Discharge Disposition:\n{disposition}\n \n"
        "Discharge Diagnosis:\nSeptic shock\nAcute hypoxemic respiratory failure\n \n"
        "Discharge Condition:\nMental Status: Clear and coherent.\n"
    )


def _write(path: Path, columns: list[str], rows: list[dict]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in columns})
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(text.getvalue())


def write_notes(
    directory: Path,
    *,
    radiology: list[dict] = (),
    detail: list[dict] = (),
    discharge: list[dict] = (),
    with_detail: bool = True,
) -> Path:
    """Write note/radiology.csv.gz, note/radiology_detail.csv.gz (unless
    ``with_detail`` is false) and note/discharge.csv.gz under ``directory``."""
    note = Path(directory) / "note"
    _write(note / "radiology.csv.gz", NOTE_COLUMNS, list(radiology))
    if with_detail:
        _write(note / "radiology_detail.csv.gz", DETAIL_COLUMNS, list(detail))
    _write(note / "discharge.csv.gz", NOTE_COLUMNS, list(discharge))
    return note


def radiology_row(
    note_id: str, subject, hadm, charttime: str, storetime: str, text: str, **extra
) -> dict:
    return {
        "note_id": note_id,
        "subject_id": subject,
        "hadm_id": hadm,
        "note_type": extra.get("note_type", "RR"),
        "note_seq": extra.get("note_seq", 1),
        "charttime": charttime,
        "storetime": storetime,
        "text": text,
    }


def detail_rows(note_id: str, subject, exam_code: str, exam_name: str) -> list[dict]:
    """radiology_detail's rows of one report: exam code and name, CPT code."""
    return [
        {
            "note_id": note_id,
            "subject_id": subject,
            "field_name": "exam_code",
            "field_value": exam_code,
            "field_ordinal": 1,
        },
        {
            "note_id": note_id,
            "subject_id": subject,
            "field_name": "exam_name",
            "field_value": exam_name,
            "field_ordinal": 1,
        },
        {
            "note_id": note_id,
            "subject_id": subject,
            "field_name": "cpt_code",
            "field_value": "71045",
            "field_ordinal": 1,
        },
    ]


__all__ = [
    "EXAMS",
    "FINDINGS",
    "IMPRESSIONS",
    "detail_rows",
    "discharge_text",
    "radiology_row",
    "radiology_text",
    "write_notes",
]
