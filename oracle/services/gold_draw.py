"""An active Gold draw (issue 33): a Gold campaign whose windows are drawn with
probabilities that grow with the Oracle's uncertainty on them, with a uniform
floor so that every window can be drawn; each pool window's probability of
being in the Gold set, uncertainty level and phase and the draw's floor are
stored (``GoldInclusion``) for the inverse-probability weights and lam strata
of score intervals (``evaluation.ppi``, ``exports.scoring_ppi``).

The uncertainty is how far other Oracle runs (a rerun, another backbone, the
rules) are from the first on the window: their status and their three item
sets, graded into levels (``evaluation.ppi_active``). An Oracle label keeps
no confidence of its own (the reply schema asks for none), so none is read.
Each level's share of the budget follows the second moment of the first
run's distance from the physicians' consensus on the windows of the pool
already labelled (the labels so far); with fewer than ``MIN_LABELLED`` of
them the levels' own uncertainty stands in, with the wider uniform floor of
``evaluation.ppi.DEFAULT_FLOOR``.

Those labels so far are the pilot, and they count in the estimates: the Gold
set is the union of the pilot and the active draw. When the labels so far
came from an earlier active draw of the pool (the first draw, with no
labels, follows the levels' own uncertainty), each window's pilot
probability p is that draw's stored one, exactly; labels that came some
other way count as a uniform draw of the pool, p = labelled / pool windows
(``pilot_probabilities``). While an earlier draw's Gold windows wait for
their labels, no new draw is made: they would count as missing. The active
draw is a Poisson draw with probabilities q over the whole pool that top the
pilot up to the levels' square-root rule with ``budget`` new windows in
expectation; each window's probability of being in the Gold set is 1 - (1 -
p)(1 - q), a pilot window's q being the one its own label did not set
(``evaluation.ppi_active.union_probabilities``), and that is the
probability stored. A pilot window the active draw takes is not labelled
again. Every window of the pool gets a row (pilot, active or not
drawn) with its level, so estimates can give lam one value per stratum of
levels over every window, as the coverage benchmark does."""

from __future__ import annotations

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from accounts.roles import require_admin
from annotation.models import Campaign, ConsensusLabel
from annotation.services.agreement import RECOMMENDING_RATINGS
from annotation.services.campaigns import campaign_create
from evaluation.ppi import poisson_draw
from evaluation.ppi_active import (
    MIN_LABELLED,
    uncertainty_levels,
    union_probabilities,
)
from oracle.models import (
    GoldInclusion,
    GoldInclusionPhase,
    OracleLabel,
    OracleLabelState,
    OracleRun,
)


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


def consensus_distance(label: OracleLabel, consensus: ConsensusLabel) -> float:
    """How far an Oracle label is from the physicians' consensus, in [0, 1]:
    the mean of a status mismatch and the Jaccard distances of the acute
    problems and red flags (texts as written up to case). Actions are left
    out: the Oracle names its rated ones by event id, the consensus by text."""
    status, problems, _, flags = _parts(label)
    items = consensus.items or {}

    def texts(key):
        return {str(i.get("text", "")).strip().casefold() for i in items.get(key, [])}

    parts = [
        float(status != (consensus.status or "")),
        _jaccard_distance(problems, texts("acute_problems")),
        _jaccard_distance(flags, texts("red_flags")),
    ]
    return float(np.mean(parts))


def pool_consensus(window_ids) -> dict[int, ConsensusLabel]:
    """The pilot: the consensus (undisputed, not dropped) of the pool's
    windows that have one, by window id; of a window labelled in several
    campaigns, its latest."""
    return {
        c.window_id: c
        for c in ConsensusLabel.objects.filter(
            window_id__in=list(window_ids), dropped=False, dispute_count=0
        ).order_by("window_id", "pk")
    }


def _refuse_open(campaign_id: int, in_gold: set[int]) -> None:
    """Refuses a new draw while Gold windows of the earlier draw ``campaign_id``
    have no settled consensus (none yet, or disputes open): their labels
    would be missing from the pilot, and the estimates' weights would take
    them as drawn and answered. A window the admins dropped is settled."""
    settled = set(
        ConsensusLabel.objects.filter(
            Q(dispute_count=0) | Q(dropped=True), window_id__in=list(in_gold)
        ).values_list("window_id", flat=True)
    )
    waiting = sorted(in_gold - settled)
    if waiting:
        shown = ", ".join(str(w) for w in waiting[:5])
        raise ValidationError(
            f"{len(waiting)} Gold window(s) of the draw of campaign {campaign_id} "
            f"have no settled consensus yet (windows {shown}"
            f"{', …' if len(waiting) > 5 else ''}): finish their labelling and "
            "adjudication first, so that the next draw builds on their labels."
        )


def pilot_probabilities(pool, consensus: dict[int, ConsensusLabel]):
    """Each pool window's probability of being among the labels so far (the
    pilot), and what they are. When every labelled window of the pool was
    in the Gold set of one earlier active draw whose rows cover the whole
    pool, the pilot is that draw and its stored probabilities are exact (the
    latest such draw: a later draw's probability is already the union of
    every phase before it). Otherwise the labels came by some other design
    (a cohort campaign, windows chosen by hand), and they count as a uniform
    draw of the pool, p = labelled / pool windows, an approximation the
    ``source`` of the new draw says it made. Returns (None, basis) when the
    pool has no labels."""
    if not consensus:
        return None, "no labels before the draw"
    rows = {}
    for campaign_id, window_id, probability, phase in (
        GoldInclusion.objects.filter(window_id__in=list(pool))
        .order_by("-campaign_id")
        .values_list("campaign_id", "window_id", "probability", "phase")
    ):
        rows.setdefault(campaign_id, {})[window_id] = (probability, phase)
    for campaign_id, of_window in rows.items():
        if len(of_window) < len(pool):
            continue
        in_gold = {
            w for w, (_, phase) in of_window.items() if phase != GoldInclusionPhase.NONE
        }
        _refuse_open(campaign_id, in_gold)
        if set(consensus) <= in_gold:
            return (
                np.array([of_window[w][0] for w in pool]),
                f"pilot of draw {campaign_id}",
            )
    labelled = sum(w in consensus for w in pool)
    return np.full(len(pool), labelled / len(pool)), "pilot counted uniform"


def _ok_labels(run: OracleRun) -> dict[int, OracleLabel]:
    return {
        label.window_id: label
        for label in OracleLabel.objects.filter(
            run=run, state=OracleLabelState.OK, window__sampled_gold=True
        ).defer("raw_response", "error", "parameters")
    }


def gold_campaign_draw_active(
    *,
    admin,
    name: str,
    run: OracleRun,
    second_run: OracleRun,
    budget: int,
    physicians,
    annotators_per_window: int = 2,
    floor: float | None = None,
    seed: int = 0,
    more_runs=(),
) -> Campaign:
    """A Gold campaign drawn from the sampled Gold windows every run
    labelled: the windows' uncertainty is the mean ``label_disagreement`` of
    ``second_run`` (and ``more_runs``) with ``run``, graded into levels; the
    draw tops the labels so far up to the square-root rule of each level's
    second moment of run's ``consensus_distance`` from them, ``floor`` of the
    budget spread uniformly, with ``budget`` new windows in expectation,
    independently with ``seed`` (``evaluation.ppi_active.union_probabilities``).
    ``floor`` defaults to ``NEYMAN_FLOOR`` when the moments come from labels,
    ``DEFAULT_FLOOR`` when they do not. The campaign holds the drawn windows
    that have no consensus yet; every pool window's probability of being in
    the Gold set (pilot or active draw, module docstring), level and phase,
    and the floor, are stored with it."""
    require_admin(admin, "draw a Gold campaign")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValidationError("The Gold budget must be a whole number of 1 or more.")
    if floor is not None and (
        not isinstance(floor, (int, float)) or not 0 < floor <= 1
    ):
        raise ValidationError(
            "The uniform floor must lie in (0, 1]: above 0, so that every window "
            "can be drawn."
        )
    others = [second_run, *more_runs]
    if len({r.pk for r in [run, *others]}) != 1 + len(others):
        raise ValidationError(
            "Choose different Oracle runs: the uncertainty is where they disagree."
        )
    first = _ok_labels(run)
    readings = [_ok_labels(r) for r in others]
    pool = sorted(set(first).intersection(*readings))
    if not pool:
        raise ValidationError(
            f"Runs {', '.join(str(r.pk) for r in [run, *others])} share no sampled "
            "Gold window with a successful label on every one."
        )
    uncertainty = np.array(
        [np.mean([label_disagreement(first[w], o[w]) for o in readings]) for w in pool]
    )
    levels = uncertainty_levels(uncertainty)
    consensus = pool_consensus(pool)
    p_pilot, pilot_basis = pilot_probabilities(pool, consensus)
    pilot = np.array([w in consensus for w in pool])
    residuals = [
        consensus_distance(first[w], consensus[w]) if w in consensus else 0.0
        for w in pool
    ]
    q, pi, _, floor = union_probabilities(
        np.zeros(len(pool)) if p_pilot is None else p_pilot,
        pilot,
        levels,
        residuals,
        budget,
        floor=None if floor is None else float(floor),
    )
    basis = (
        "the levels' uncertainty (too few labels so far)"
        if pilot.sum() < MIN_LABELLED
        else "the levels' error on the labels so far"
    )
    drawn = poisson_draw(q, np.random.default_rng(seed))
    chosen = [w for w, d, old in zip(pool, drawn, pilot) if d and not old]
    if not chosen:
        raise ValidationError(
            f"The draw with seed {seed} took no unlabelled window of {len(pool)}; "
            "raise the budget or change the seed."
        )
    source = (
        f"disagreement of Oracle runs {run.pk} and "
        f"{', '.join(str(r.pk) for r in others)} over {len(pool)} windows, "
        f"by {basis}; {pilot_basis}; budget {budget}, seed {seed}"
    )[:200]
    phases = [
        GoldInclusionPhase.PILOT
        if old
        else GoldInclusionPhase.ACTIVE
        if d
        else GoldInclusionPhase.NONE
        for old, d in zip(pilot, drawn)
    ]
    # Everything above only reads: the leave-one-out rule runs once per pilot
    # window over the pool, so it stays out of the transaction, which writes
    # the campaign and its rows together or not at all.
    with transaction.atomic():
        campaign = campaign_create(
            admin=admin,
            name=name,
            windows=chosen,
            physicians=physicians,
            annotators_per_window=annotators_per_window,
            seed=seed,
        )
        GoldInclusion.objects.bulk_create(
            (
                GoldInclusion(
                    campaign=campaign,
                    window_id=w,
                    uncertainty=float(u),
                    level=int(lv),
                    probability=float(p),
                    pilot_probability=None if p_pilot is None else float(pp),
                    phase=phase,
                    floor=float(floor),
                    source=source,
                )
                for w, u, lv, p, pp, phase in zip(
                    pool,
                    uncertainty,
                    levels,
                    pi,
                    p_pilot if p_pilot is not None else pi,
                    phases,
                )
            ),
            batch_size=500,
        )
    return campaign
