"""Agreement and consensus for a whole campaign: 930 windows, 2 raters, the
paper's label counts (about 2 acute problems, 2.4 recommended actions and 1.1 red
flags per window per rater), timed with a cold embedding cache and a warm one.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/agreement_bench.py [--database bench_h4]

DATABASE_URL names a database to connect to for creating and dropping the
benchmark's own (``--database``, dropped and made again). Stays, windows, the
physicians and the campaign are made with the factories and the real
``campaign_create``; the submitted labels are written in bulk (the submit path
is measured by benchmarks/annotate_load.py, not here). Item texts come from
ICU concepts, each with several phrasings, abbreviations and qualifiers, and
the second rater names the first rater's concept in other words only part of
the time, so the matching is not a string comparison.

Timed: ``campaign_agreement_refresh`` (what the dashboard's "recompute" runs)
with (1) the embedding cache empty, the model already loaded (its load time is
printed apart), and (2) the cache filled, in a fresh matcher with nothing in
memory, as a new worker process has it. Target: warm <= 10 s; cold bounded by
the embedding throughput of the unique texts, printed in texts/s.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._database import database_create, database_drop  # noqa: E402

WINDOWS = 930
STAY_HOURS = 24  # 48 half-hour windows a stay
STATUSES = ("improving", "stable", "deteriorating")

# Concepts with phrasings physicians use for them; the second rater picks another
# phrasing of the same concept (a match to find), or another concept.
PROBLEMS = [
    [
        "Septic shock",
        "Shock due to sepsis",
        "Sepsis with hypotension on pressors",
        "Distributive shock, likely septic",
    ],
    [
        "Acute kidney injury",
        "AKI",
        "AKI stage 2",
        "Worsening renal function",
        "Rising creatinine with oliguria",
    ],
    [
        "Acute respiratory failure",
        "Hypoxemic respiratory failure",
        "ARDS",
        "Worsening oxygenation",
        "Type 1 respiratory failure",
    ],
    ["Delirium", "Hyperactive delirium", "Agitation and confusion", "ICU delirium"],
    ["Hyperkalemia", "High potassium", "K 6.4 mmol/L"],
    ["Hypokalemia", "Low potassium", "Potassium 2.9"],
    [
        "Atrial fibrillation with RVR",
        "New AF with rapid ventricular response",
        "Rapid AF",
    ],
    ["Upper GI bleeding", "GI bleed", "Melena with falling hemoglobin"],
    ["Lactic acidosis", "Rising lactate", "Hyperlactatemia"],
    ["Hypoglycemia", "Low blood glucose", "Glucose 2.8 mmol/L"],
    ["Cardiogenic shock", "Low cardiac output state", "Pump failure with shock"],
    ["Pneumonia", "Ventilator-associated pneumonia", "VAP", "New infiltrate"],
    ["Thrombocytopenia", "Low platelets", "Platelets falling"],
    ["Coagulopathy", "Raised INR", "DIC suspected"],
    ["Status epilepticus", "Ongoing seizures", "Recurrent seizures"],
]
ACTIONS = [
    [
        "Start norepinephrine",
        "Begin NE infusion",
        "Vasopressor support",
        "Titrate noradrenaline to MAP 65",
    ],
    ["Blood cultures", "Obtain blood cultures", "Draw cultures before antibiotics"],
    [
        "Broad-spectrum antibiotics",
        "Start piperacillin-tazobactam",
        "Empirical antibiotics",
    ],
    ["Fluid bolus", "500 mL crystalloid bolus", "Give IV fluids"],
    ["Start CRRT", "Renal replacement therapy", "Begin dialysis"],
    ["Intubate", "Endotracheal intubation", "Secure the airway"],
    ["Increase PEEP", "Raise PEEP to 12", "Recruitment and higher PEEP"],
    ["Prone positioning", "Prone the patient", "Proning for ARDS"],
    ["Correct potassium", "IV potassium replacement", "Give KCl"],
    ["Calcium gluconate and insulin-dextrose", "Treat hyperkalemia", "Shift potassium"],
    ["Check lactate", "Repeat lactate", "Serial lactate measurement"],
    ["CT head", "Urgent head CT", "Brain imaging"],
    ["Transfuse red cells", "Blood transfusion", "Give 1 unit PRBC"],
    ["Echocardiography", "Bedside echo", "TTE"],
    ["Stop sedation", "Sedation hold", "Daily sedation interruption"],
]
FLAGS = [
    ["Avoid fluid overload", "Avoid excessive fluids", "No further fluid boluses"],
    ["Avoid nephrotoxic drugs", "No NSAIDs or contrast", "Avoid nephrotoxins"],
    ["Avoid benzodiazepines", "No benzos for delirium"],
    ["Do not extubate yet", "Not ready for extubation", "Avoid premature extubation"],
    ["Avoid hypotension", "Keep MAP above 65"],
    ["Avoid potassium supplements", "No KCl"],
    ["Avoid anticoagulation", "Hold heparin", "No anticoagulants while bleeding"],
    ["Avoid hyperoxia", "Target SpO2 92-96%"],
]
QUALIFIERS = ["", "", "", "likely ", "suspected ", "worsening ", "new ", "ongoing "]
SUFFIXES = [
    "",
    "",
    "",
    "",
    " - monitor",
    " (reassess in 1 h)",
    " overnight",
    " per protocol",
]


def _phrase(rng: random.Random, concept: list[str]) -> str:
    text = rng.choice(concept)
    qualifier = rng.choice(QUALIFIERS)
    if qualifier:
        text = qualifier + text[0].lower() + text[1:]
    return (text + rng.choice(SUFFIXES)).strip()


def _count(rng: random.Random, mean: float) -> int:
    """A Poisson count with the given mean (Knuth's method)."""
    limit, k, product = pow(2.718281828459045, -mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def _items(rng, pool, n, shared_from=None, p_same=0.6):
    """n items; with ``shared_from`` (the first rater's concepts) each item names
    one of those concepts in its own words with probability ``p_same``."""
    concepts = []
    chosen = []
    for k in range(max(0, n)):
        if shared_from and k < len(shared_from) and rng.random() < p_same:
            concept = shared_from[k]
        else:
            concept = rng.randrange(len(pool))
        if concept in chosen:
            continue
        chosen.append(concept)
        concepts.append(concept)
    return concepts, [{"text": _phrase(rng, pool[c]), "evidence": []} for c in concepts]


def _build(seed: int):
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from accounts.roles import Role, roles_ensure
    from annotation.models import Assignment, AssignmentState, Label
    from annotation.services import campaign_create
    from tests.factories import DRIP, make_admission, make_event, make_stay, make_user
    from windows.models import Window
    from windows.windowing import windows_build

    call_command("migrate", verbosity=0)
    rng = random.Random(seed)
    groups = roles_ensure()
    admin = make_user(staff=True, username="bench-admin")
    admin.groups.add(groups[Role.ADMIN])
    physicians = []
    for n in (1, 2):
        user = make_user(username=f"bench-phys{n}")
        user.groups.add(groups[Role.PHYSICIAN])
        physicians.append(user)
    windows = []
    while len(windows) < WINDOWS:
        stay = make_stay(admission=make_admission(), hours=STAY_HOURS)
        built = windows_build(stay=stay)
        windows += built[: WINDOWS - len(windows)]
    Window.objects.filter(pk__in=[w.pk for w in windows]).update(sampled_gold=True)
    campaign = campaign_create(
        admin=admin, name="Agreement benchmark", windows=windows, physicians=physicians
    )
    # A recorded critical action in about 4 of 10 windows, rated by both raters
    # (best practice or acceptable): part of the Recommended Actions set.
    rated = {}
    for window in windows:
        if rng.random() < 0.4:
            # A drip's row (tests.factories.DRIP) at the window's start.
            norepinephrine = {"category": "norepinephrine", "name": "Norepinephrine"}
            rated[window.pk] = make_event(
                admission=window.stay.admission,
                time=window.start,
                value_num=0.1,
                **(DRIP | norepinephrine),
            ).pk
    assignments = {
        (a.window_id, a.annotator_id): a
        for a in Assignment.objects.filter(campaign=campaign)
    }
    now = timezone.now()
    labels = []
    for window in windows:
        first = {}
        for rater, physician in enumerate(physicians):
            shared = first if rater else {}
            status = (
                first["status"]
                if rater and rng.random() < 0.7
                else rng.choice(STATUSES)
            )
            ratings = []
            if window.pk in rated:
                ratings = [
                    {
                        "event_id": rated[window.pk],
                        "rating": rng.choice(("best_practice", "acceptable")),
                        "evidence": [],
                    }
                ]
            # Means a little above the targets: a concept drawn twice in one
            # label is kept once.
            added_mean = 2.55 - (1 if ratings else 0)
            p_c, problems = _items(rng, PROBLEMS, _count(rng, 2.1), shared.get("p"))
            a_c, added = _items(rng, ACTIONS, _count(rng, added_mean), shared.get("a"))
            f_c, flags = _items(rng, FLAGS, _count(rng, 1.2), shared.get("f"))
            if not rater:
                first = {"status": status, "p": p_c, "a": a_c, "f": f_c}
            assignment = assignments[(window.pk, physician.pk)]
            labels.append(
                Label(
                    assignment=assignment,
                    status=status,
                    payload={
                        "status": status,
                        "status_evidence": [],
                        "acute_problems": problems,
                        "action_ratings": ratings,
                        "added_actions": added,
                        "red_flags": flags,
                    },
                    version=1,
                    submitted_at=now,
                    submission_id=f"bench-{assignment.pk}",
                    time_on_task_seconds=rng.randint(60, 600),
                )
            )
    Label.objects.bulk_create(labels)
    Assignment.objects.filter(campaign=campaign).update(state=AssignmentState.SUBMITTED)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return campaign, labels


def _label_counts(labels) -> dict:
    n = len(labels)
    return {
        "problems": sum(len(x.payload["acute_problems"]) for x in labels) / n,
        "actions": sum(
            len(x.payload["added_actions"]) + len(x.payload["action_ratings"])
            for x in labels
        )
        / n,
        "flags": sum(len(x.payload["red_flags"]) for x in labels) / n,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="bench_h4")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--profile", action="store_true", help="print a cProfile of the warm run"
    )
    args = parser.parse_args()
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.database):
        parser.error("--database: lower-case letters, digits and _ only")
    os.environ["DATABASE_URL"] = database_create(args.database)
    os.environ.setdefault(
        "REALICU_VAR_DIR", tempfile.mkdtemp(prefix="agreement-bench-")
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connections

    from annotation.models import ConsensusLabel, WindowAgreement
    from annotation.selectors.irr import campaign_irr
    from annotation.services import campaign_agreement_refresh
    from evaluation.matcher import load_model, matcher_for_settings
    from evaluation.models import EmbeddingCache

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    try:
        started = time.perf_counter()
        campaign, labels = _build(args.seed)
        counts = _label_counts(labels)
        print(
            f"Campaign: {WINDOWS} windows x 2 raters, {len(labels)} labels built in "
            f"{time.perf_counter() - started:.1f} s; per window per rater: "
            f"{counts['problems']:.2f} problems, {counts['actions']:.2f} actions, "
            f"{counts['flags']:.2f} red flags"
        )
        matcher = matcher_for_settings()
        started = time.perf_counter()
        load_model(matcher.model_name)
        print(
            f"Model {matcher.model_name} (tau {matcher.tau:g}) loaded in "
            f"{time.perf_counter() - started:.1f} s (not in the timings below)"
        )

        EmbeddingCache.objects.filter(model_name=matcher.model_name).delete()
        started = time.perf_counter()
        cold = campaign_agreement_refresh(campaign=campaign, matcher=matcher)
        cold_s = time.perf_counter() - started
        unique = cold["texts"]
        embedded = matcher.embedded_count
        print(
            f"Cold cache: {cold_s:.2f} s for {cold['computed']} windows; "
            f"{unique} unique item texts, {embedded} embedded "
            f"({embedded / cold_s:.0f} texts/s over the whole run)"
        )

        # Embedding throughput alone: the same unique texts through the model.
        model = load_model(matcher.model_name)
        texts = list(
            EmbeddingCache.objects.filter(model_name=matcher.model_name).values_list(
                "text", flat=True
            )
        )
        started = time.perf_counter()
        model.encode(
            texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )
        encode_s = time.perf_counter() - started
        print(
            f"Embedding throughput: {len(texts)} texts in {encode_s:.2f} s = "
            f"{len(texts) / encode_s:.0f} texts/s"
        )

        warm_matcher = matcher_for_settings()
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
        started = time.perf_counter()
        warm = campaign_agreement_refresh(campaign=campaign, matcher=warm_matcher)
        warm_s = time.perf_counter() - started
        if args.profile:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        print(
            f"Warm cache (fresh matcher, vectors from the database): {warm_s:.2f} s "
            f"for {warm['computed']} windows, {warm_matcher.embedded_count} embedded "
            f"-> target <= 10 s: {'met' if warm_s <= 10 else 'MISSED'}"
        )
        started = time.perf_counter()
        irr = campaign_irr(campaign=campaign)
        irr_s = time.perf_counter() - started
        status = irr["status"]
        queue = ConsensusLabel.objects.filter(campaign=campaign, dispute_count__gt=0)
        print(
            f"IRR (1000 bootstrap replicates) in {irr_s:.2f} s: status agreement "
            f"{status['percent_agreement']['estimate']:.2f}, "
            f"{status['kappa_name']} kappa {status['kappa']['estimate']:.2f}, "
            "mean pairwise F1 "
            + ", ".join(
                f"{task} {v['mean_pairwise_f1']['estimate']:.2f}"
                for task, v in irr["set_tasks"].items()
            )
        )
        print(
            f"{WindowAgreement.objects.filter(campaign=campaign).count()} agreements, "
            f"{queue.count()} windows in the adjudication queue; keep rates "
            + ", ".join(
                f"{task} {v['keep_rate']:.2f}" for task, v in irr["keep_rates"].items()
            )
        )
    finally:
        connections.close_all()
        if not args.keep:
            database_drop(args.database)
    return 0


if __name__ == "__main__":
    from benchmarks._cpu import report_at_exit  # wall, CPU and load at the end

    report_at_exit()
    sys.exit(main())
