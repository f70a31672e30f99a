"""Clinical label texts the release benchmarks draw their generated Oracle
labels and predictions from: acute problems, actions and red flags as a
physician writes them, with modifiers, so the semantic matcher meets
realistic near-matches."""

from __future__ import annotations

import random

PROBLEMS = [
    "septic shock",
    "acute kidney injury",
    "hypoxemic respiratory failure",
    "delirium",
    "hyperkalemia",
    "hypokalemia",
    "atrial fibrillation with RVR",
    "gastrointestinal bleeding",
    "lactic acidosis",
    "hypotension",
    "pneumonia",
    "pulmonary edema",
    "hypoglycemia",
    "hyperglycemia",
    "anemia",
    "thrombocytopenia",
    "coagulopathy",
    "seizure",
    "agitation",
    "ventilator dyssynchrony",
]
ACTIONS = [
    "start norepinephrine",
    "titrate norepinephrine",
    "give fluid bolus",
    "obtain blood cultures",
    "start broad-spectrum antibiotics",
    "intubate",
    "increase PEEP",
    "give furosemide",
    "replace potassium",
    "start insulin infusion",
    "transfuse red cells",
    "start CRRT",
    "give haloperidol",
    "check lactate",
    "reduce sedation",
    "chest x-ray",
    "arterial blood gas",
    "start heparin",
    "stop heparin",
    "prone positioning",
]
FLAGS = [
    "avoid fluid overload",
    "avoid nephrotoxic drugs",
    "avoid benzodiazepines",
    "avoid hypotonic fluids",
    "avoid high tidal volumes",
    "avoid potassium",
]
MODIFIERS = ["", "worsening ", "persistent ", "new ", "severe ", "suspected "]


def texts_drawn(rng: random.Random, pool: list[str], n: int) -> list[str]:
    """``n`` distinct texts of ``pool``, each with a modifier drawn by ``rng``."""
    return [rng.choice(MODIFIERS) + t for t in rng.sample(pool, n)]
