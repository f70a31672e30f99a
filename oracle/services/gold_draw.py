"""An active Gold draw (issue 33): a Gold campaign whose windows are drawn with
probabilities that grow with the Oracle's uncertainty on them, with a uniform
floor so that every window can be drawn; each drawn window's probability is
stored (``GoldInclusion``) for the inverse-probability weights of score
intervals (``evaluation.ppi``, ``exports.scoring_ppi``)."""

from __future__ import annotations

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.roles import require_admin
from annotation.models import Campaign
from annotation.services.agreement import RECOMMENDING_RATINGS
from annotation.services.campaigns import campaign_create
from evaluation.ppi import DEFAULT_FLOOR, inclusion_probabilities, poisson_draw
from oracle.models import GoldInclusion, OracleLabel, OracleLabelState, OracleRun


def _parts(label: OracleLabel) -> tuple[str, set, set, set]:
    payload = label.payload or {}

    def texts(key):
        return {str(i.get("text", "")).strip().casefold() for i in payload.get(key, [])}

    actions = {
        f"event {r.get('event_id')}"
        for r in payload.get("action_ratings", [])
        if r.get("rating") in RECOMMENDING_RATINGS
    } | texts("added_actions")
    return label.status or "", texts("acute_problems"), actions, texts("red_flags")


def _jaccard_distance(a: set, b: set) -> float:
    union = a | b
    return 1 - len(a & b) / len(union) if union else 0.0


def label_disagreement(a: OracleLabel, b: OracleLabel) -> float:
    """How far two Oracle readings of one window disagree, in [0, 1]: the mean
    over the status (0 or 1) and the three set tasks (1 - Jaccard of their
    texts, exactly as written up to case)."""
    sa, *sets_a = _parts(a)
    sb, *sets_b = _parts(b)
    parts = [float(sa != sb)] + [
        _jaccard_distance(x, y) for x, y in zip(sets_a, sets_b)
    ]
    return float(np.mean(parts))


def _ok_labels(run: OracleRun) -> dict[int, OracleLabel]:
    return {
        label.window_id: label
        for label in OracleLabel.objects.filter(
            run=run, state=OracleLabelState.OK, window__sampled_gold=True
        ).defer("raw_response", "error", "parameters")
    }


@transaction.atomic
def gold_campaign_draw_active(
    *,
    admin,
    name: str,
    run: OracleRun,
    second_run: OracleRun,
    budget: int,
    physicians,
    annotators_per_window: int = 2,
    floor: float = DEFAULT_FLOOR,
    seed: int = 0,
) -> Campaign:
    """A Gold campaign drawn from the sampled Gold windows both runs labelled:
    each window with probability ``floor`` * budget / N plus the rest of the
    budget in proportion to the root of the runs' disagreement on it
    (``label_disagreement``), drawn independently with ``seed``. The drawn
    windows' probabilities are stored with the campaign."""
    require_admin(admin, "draw a Gold campaign")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValidationError("The Gold budget must be a whole number of 1 or more.")
    if not isinstance(floor, (int, float)) or not 0 < floor <= 1:
        raise ValidationError(
            "The uniform floor must lie in (0, 1]: above 0, so that every window "
            "can be drawn."
        )
    if run.pk == second_run.pk:
        raise ValidationError(
            "Choose two different Oracle runs: the uncertainty is where they disagree."
        )
    first, second = _ok_labels(run), _ok_labels(second_run)
    pool = sorted(set(first) & set(second))
    if not pool:
        raise ValidationError(
            f"Runs {run.pk} and {second_run.pk} share no sampled Gold window with a "
            "successful label on both."
        )
    uncertainty = np.array([label_disagreement(first[w], second[w]) for w in pool])
    pi = inclusion_probabilities(uncertainty, budget, floor=float(floor))
    drawn = poisson_draw(pi, np.random.default_rng(seed))
    if not drawn.any():
        raise ValidationError(
            f"The draw with seed {seed} took no window of {len(pool)}; raise the "
            "budget or change the seed."
        )
    chosen = [w for w, d in zip(pool, drawn) if d]
    campaign = campaign_create(
        admin=admin,
        name=name,
        windows=chosen,
        physicians=physicians,
        annotators_per_window=annotators_per_window,
        seed=seed,
    )
    source = (
        f"disagreement of Oracle runs {run.pk} and {second_run.pk} over {len(pool)} "
        f"windows; budget {budget}, uniform floor {float(floor):g}, seed {seed}"
    )
    GoldInclusion.objects.bulk_create(
        GoldInclusion(
            campaign=campaign,
            window_id=w,
            uncertainty=float(u),
            probability=float(p),
            source=source,
        )
        for w, u, p, d in zip(pool, uncertainty, pi, drawn)
        if d
    )
    return campaign
