"""Clinical label texts the release benchmarks draw their generated Oracle
labels and predictions from: acute problems, actions and red flags as a
physician writes them, with modifiers, so the semantic matcher meets
realistic near-matches."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable

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


def agreeing_labels_submit(campaign, *, problems, actions, flags=()) -> None:
    """Every assignment of ``campaign`` labelled, drawn per window so that the
    window's physicians agree and it reaches a consensus without
    adjudication: a status, two of ``problems``, every recorded critical
    action rated acceptable, two of ``actions`` and one of ``flags`` (none
    when ``flags`` is empty)."""
    from annotation.models import Assignment
    from annotation.selectors import recorded_critical_actions
    from annotation.services import label_submit

    for assignment in Assignment.objects.filter(campaign=campaign).order_by("pk"):
        rng = random.Random(assignment.window_id)
        payload = {
            "status": rng.choice(["improving", "stable", "deteriorating"]),
            "status_evidence": [],
            "acute_problems": [
                {"text": t, "evidence": []} for t in rng.sample(problems, 2)
            ],
            "action_ratings": [
                {"event_id": e.pk, "rating": "acceptable", "evidence": []}
                for e in recorded_critical_actions(assignment=assignment)
            ],
            "added_actions": [
                {"text": t, "evidence": []} for t in rng.sample(actions, 2)
            ],
            "red_flags": [{"text": t, "evidence": []} for t in rng.sample(flags, 1)]
            if flags
            else [],
        }
        label_submit(
            annotator=assignment.annotator,
            assignment_id=assignment.pk,
            payload=payload,
            base_version=0,
        )


def agreed_gold_campaign(
    windows, *, name: str, physicians: int, problems, actions, flags=()
):
    """A superuser "bench" and ``physicians`` physicians, their Gold campaign
    over ``windows`` (every physician on every window, no evidence required),
    labelled in agreement (``agreeing_labels_submit``) and its agreement
    computed: (the admin, the campaign)."""
    from django.contrib.auth import get_user_model

    from accounts.roles import Role, roles_ensure
    from annotation.services import campaign_create
    from annotation.services.agreement import campaign_agreement_refresh
    from evaluation.matcher import matcher_for_settings

    users = get_user_model().objects
    admin = users.create_superuser("bench", password="x")
    group = roles_ensure()[Role.PHYSICIAN]
    physician_users = []
    for n in range(physicians):
        physician = users.create_user(f"physician{n}", password="x")
        physician.groups.add(group)
        physician_users.append(physician)
    campaign = campaign_create(
        admin=admin,
        name=name,
        windows=windows,
        physicians=physician_users,
        annotators_per_window=len(physician_users),
        evidence_required=False,
    )
    agreeing_labels_submit(campaign, problems=problems, actions=actions, flags=flags)
    campaign_agreement_refresh(campaign=campaign, matcher=matcher_for_settings())
    return admin, campaign


def predictions_write(
    path: str, window_ids: Iterable[int], prediction: Callable[[], dict]
) -> int:
    """A prediction file at ``path``: a JSON line a window of ``window_ids``,
    its ``window_id`` then what ``prediction()`` draws for it; the count."""
    count = 0
    with open(path, "w") as out:
        for window_id in window_ids:
            out.write(json.dumps({"window_id": window_id, **prediction()}) + "\n")
            count += 1
    return count
