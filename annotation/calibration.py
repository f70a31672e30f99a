"""Threshold calibration of the semantic matcher (spec section 5), its first
half: pairs of real label items drawn near the current tau and at random (in a
worker, as a job), and the physicians an admin invites to judge them. Which
items may be drawn is blindness's (annotation.blindness); judging, the sweep
report and adopting a tau are annotation.calibration_judging's."""

from __future__ import annotations

import logging
import random

import numpy as np
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, F, Q
from django.http import Http404
from django.utils import timezone

from accounts.ids import id_parse
from accounts.roles import physicians_only, require_admin
from annotation import blindness
from annotation.models import (
    CalibrationDraw,
    CalibrationInvitation,
    CalibrationPair,
    CalibrationSet,
    CalibrationStratum,
    Campaign,
    ConsensusTask,
    RecomputeState,
)
from jobs.leases import is_live, job_claim, job_fail, job_heartbeat, job_release
from jobs.outbox import outbox_send

logger = logging.getLogger(__name__)

# The free-text fields whose items are paired, by the set task they belong to.
# Rated recorded actions are event names, the same for every rater: left out.
TASK_FIELDS = {
    ConsensusTask.ACUTE_PROBLEMS: ("acute_problems",),
    ConsensusTask.RECOMMENDED_ACTIONS: ("added_actions",),
    ConsensusTask.RED_FLAGS: ("red_flags",),
}
# Distinct texts per task considered when drawing (a random subset beyond it),
# which bounds the cosine matrix at about 2.25 M entries per task.
MAX_TEXTS_PER_TASK = 1500
MAX_PAIRS_PER_STRATUM = 200
DEFAULT_BAND = 0.15


def _campaign_texts(
    campaigns: list[Campaign], normalize, judges: list
) -> dict[str, list[dict]]:
    """Distinct item texts (by normalized form) per set task of the labels the
    judges may be shown (``blindness.calibration_labels``), each with where it
    was first found; texts a judge's co-rater wrote are left out wherever they
    appear."""
    texts: dict[str, dict[str, dict]] = {task: {} for task in TASK_FIELDS}
    hidden = blindness.hidden_text_keys(judges)
    labels = (
        blindness.calibration_labels(campaigns=campaigns, judges=judges)
        .order_by("pk")
        .values_list("pk", "payload")
    )
    for label_id, payload in labels:
        for task, fields in TASK_FIELDS.items():
            for field in fields:
                for index, item in enumerate((payload or {}).get(field) or []):
                    text = (item.get("text") or "").strip()
                    if not text or blindness.text_key(text) in hidden:
                        continue
                    key = normalize(text)
                    texts[task].setdefault(
                        key,
                        {
                            "text": text,
                            "source": {
                                "label_id": label_id,
                                "field": field,
                                "index": index,
                            },
                        },
                    )
    return {task: list(found.values()) for task, found in texts.items()}


def calibration_set_draw(
    *,
    admin,
    name: str,
    campaigns,
    matcher,
    per_stratum: int = 20,
    band: float = DEFAULT_BAND,
    seed: int = 0,
    judges=(),
) -> CalibrationSet:
    """Draw pairs of items of the same task from the campaigns' submitted
    labels, ``per_stratum`` in each stratum: near matches (tau <= cos < tau +
    band), near misses (tau - band <= cos < tau) and random pairs, cos being
    ``matcher.similarity`` (the configured model's cosine, -1 for a pair its
    polarity guard vetoes: the decision matching makes) and tau its current
    one. A stratum with fewer candidates than asked gets all of them.

    ``judges`` are invited to judge the set. Items come from closed windows and
    from windows none of them still rates (``blindness.calibration_labels``):
    without judges, from closed windows only."""
    name, campaigns, judges = _draw_check(
        admin, name, campaigns, per_stratum, band, judges
    )
    rng = random.Random(seed)
    tau = float(matcher.tau)
    candidates: dict[str, list[tuple]] = {s: [] for s in CalibrationStratum.values}
    for task, entries in _campaign_texts(campaigns, matcher.normalize, judges).items():
        if len(entries) > MAX_TEXTS_PER_TASK:
            entries = rng.sample(entries, MAX_TEXTS_PER_TASK)
        if len(entries) < 2:
            continue
        texts = [e["text"] for e in entries]
        # The guarded similarity (a vetoed opposite pair is -1), the decision
        # every metric thresholds, so judges' sweeps judge that decision.
        similarities = matcher.similarity(texts, texts)
        rows, cols = np.triu_indices(len(entries), k=1)
        values = similarities[rows, cols]
        near_match = np.flatnonzero((values >= tau) & (values < tau + band))
        near_miss = np.flatnonzero((values >= tau - band) & (values < tau))
        for stratum, picked in (
            (CalibrationStratum.NEAR_MATCH, near_match),
            (CalibrationStratum.NEAR_MISS, near_miss),
            (CalibrationStratum.RANDOM, np.arange(values.size)),
        ):
            # Sample within the task first, so a task with many texts does not
            # crowd the others out of the shared draw below.
            chosen = rng.sample(list(picked), min(per_stratum, picked.size))
            candidates[stratum] += [
                (task, entries[rows[k]], entries[cols[k]], float(values[k]))
                for k in chosen
            ]
    pairs = []
    for stratum, found in candidates.items():
        for task, a, b, cosine in rng.sample(found, min(per_stratum, len(found))):
            if rng.random() < 0.5:
                a, b = b, a
            pairs.append((stratum, task, a, b, cosine))
    if not pairs:
        raise ValidationError(
            "The campaigns' submitted labels that these judges may see (closed "
            "windows, and windows none of them still rates) hold fewer than two "
            "distinct items of any task: there is nothing to pair yet."
        )
    rng.shuffle(pairs)
    with transaction.atomic():
        calibration_set = CalibrationSet.objects.create(
            name=name,
            model_name=matcher.model_name,
            tau_at_draw=tau,
            band=band,
            seed=seed,
            created_by=admin,
        )
        calibration_set.campaigns.set(campaigns)
        _invite(admin=admin, calibration_set=calibration_set, judges=judges)
        CalibrationPair.objects.bulk_create(
            [
                CalibrationPair(
                    calibration_set=calibration_set,
                    position=position,
                    task=task,
                    text_a=a["text"][:300],
                    text_b=b["text"][:300],
                    cosine=cosine,
                    stratum=stratum,
                    sources=[a["source"], b["source"]],
                )
                for position, (stratum, task, a, b, cosine) in enumerate(pairs)
            ]
        )
    return calibration_set


def _draw_check(admin, name, campaigns, per_stratum, band, judges) -> tuple:
    """The draw's name, campaigns and judges, or a ValidationError naming what
    is wrong with the request (checked before anything is queued or drawn)."""
    require_admin(admin, "draw calibration pairs")
    name = (name or "").strip()
    campaigns = list(campaigns)
    judges = _judges_resolve(judges)
    if not name:
        raise ValidationError("Give the calibration set a name.")
    if CalibrationSet.objects.filter(name=name).exists():
        raise ValidationError(f'A calibration set named "{name}" already exists.')
    if not campaigns:
        raise ValidationError("Choose at least one campaign to draw items from.")
    if (
        not isinstance(per_stratum, int)
        or not 1 <= per_stratum <= MAX_PAIRS_PER_STRATUM
    ):
        raise ValidationError(
            f"Pairs per stratum must be a whole number from 1 to "
            f"{MAX_PAIRS_PER_STRATUM}."
        )
    if not 0 < band <= 0.5:
        raise ValidationError("The band must be above 0 and at most 0.5.")
    return name, campaigns, judges


# The draw as a job --------------------------------------------------------------

DRAW_TASK = "annotation.tasks.calibration_draw_task"


def calibration_draw_request(
    *,
    admin,
    name: str,
    campaigns,
    per_stratum: int = 20,
    band: float = DEFAULT_BAND,
    seed: int = 0,
    judges=(),
) -> CalibrationDraw:
    """Queue a draw (``calibration_set_draw``) for a worker: the draw embeds
    the items with the matcher model, which the web processes never load. The
    request is checked here, so a bad one is refused at once and nothing is
    queued; a draw of the same name still queued or running is refused too."""
    name, campaigns, judges = _draw_check(
        admin, name, campaigns, per_stratum, band, judges
    )
    now = timezone.now()
    with transaction.atomic():
        busy = (
            CalibrationDraw.objects.select_for_update()
            .filter(
                name=name,
                state__in=(RecomputeState.QUEUED, RecomputeState.RUNNING),
            )
            .first()
        )
        if busy is not None and is_live(busy, now):
            raise ValidationError(
                f'A calibration set named "{name}" is already being drawn.'
            )
        draw = CalibrationDraw.objects.create(
            name=name,
            per_stratum=per_stratum,
            band=band,
            seed=seed,
            created_by=admin,
            heartbeat_at=now,
            progress_label="queued",
        )
        draw.campaigns.set(campaigns)
        draw.judges.set(judges)
        outbox_send(
            task=DRAW_TASK, args=[draw.pk], key=f"job:calibration-draw:{draw.pk}"
        )
    return draw


def calibration_draw_get(*, admin, draw_id) -> CalibrationDraw:
    require_admin(admin, "see calibration draws")
    pk = id_parse(draw_id)
    draw = (
        CalibrationDraw.objects.filter(pk=pk).select_related("created_by").first()
        if pk is not None
        else None
    )
    if draw is None:
        raise Http404("No such calibration draw.")
    return draw


def calibration_draw_run(*, draw_id: int, matcher_factory=None) -> str:
    """Run the draw ``draw_id`` in this worker: take it (or return when it is
    finished or held by a live worker), load the matcher, draw, and finish it
    done (with its set) or failed (with the reason). Idempotent: a rerun after
    a crash that had already written the set takes that set as its result."""
    from evaluation.matcher import MatcherUnavailable, matcher_for_settings
    from jobs.leases import JobLeaseLost

    lease = job_claim(model=CalibrationDraw, pk=draw_id)
    if lease is None:
        return "not taken"
    draw = CalibrationDraw.objects.select_related("created_by").get(pk=draw_id)

    def finish(state, label, **fields):
        job_release(
            model=CalibrationDraw,
            pk=draw.pk,
            lease=lease,
            state=state,
            finished_at=timezone.now(),
            progress_label=label,
            **fields,
        )

    done = CalibrationSet.objects.filter(
        name=draw.name, created_by=draw.created_by, created_at__gte=draw.created_at
    ).first()
    if done is not None:
        finish(RecomputeState.DONE, "done", calibration_set=done)
        return "done"
    try:
        with job_heartbeat(model=CalibrationDraw, pk=draw.pk, lease=lease) as beat:
            beat(0, 0, "loading the matcher model and embedding the items")
            drawn = calibration_set_draw(
                admin=draw.created_by,
                name=draw.name,
                campaigns=draw.campaigns.all(),
                matcher=(matcher_factory or matcher_for_settings)(),
                per_stratum=draw.per_stratum,
                band=draw.band,
                seed=draw.seed,
                judges=draw.judges.all(),
            )
    except JobLeaseLost:
        logger.warning("calibration draw %s: lease lost, stopping", draw_id)
        return "lease lost"
    except (ValidationError, PermissionDenied, MatcherUnavailable) as error:
        # A reason for the admin, in their words: no exception's class name.
        text = "; ".join(getattr(error, "messages", None) or [str(error)])
        job_fail(model=CalibrationDraw, pk=draw.pk, lease=lease, error=text)
        return "failed"
    except Exception as error:
        logger.exception("calibration draw %s failed", draw_id)
        job_fail(model=CalibrationDraw, pk=draw.pk, lease=lease, error=error)
        return "failed"
    finish(
        RecomputeState.DONE,
        f"done: {drawn.pairs.count()} pairs",
        calibration_set=drawn,
    )
    return "done"


# Invitations ------------------------------------------------------------------


def _judges_resolve(judges) -> list:
    return physicians_only(
        judges,
        refusal=lambda names, one: (
            "Only active physicians judge calibration pairs; "
            f"{names} {'is' if one else 'are'} not one."
        ),
    )


def _invite(*, admin, calibration_set: CalibrationSet, judges: list) -> int:
    now = timezone.now()
    created = CalibrationInvitation.objects.bulk_create(
        [
            CalibrationInvitation(
                calibration_set=calibration_set,
                judge=judge,
                invited_by=admin,
                invited_at=now,
            )
            for judge in judges
        ],
        ignore_conflicts=True,
    )
    return len(created)


@transaction.atomic
def calibration_invite(*, admin, calibration_set: CalibrationSet, judges) -> int:
    """Invite physicians to judge the set (those already invited stay as they
    were). Each is shown only the pairs blindness lets them see."""
    require_admin(admin, "invite calibration judges")
    judges = _judges_resolve(judges)
    if not judges:
        raise ValidationError("Choose the physicians to invite.")
    already = set(
        CalibrationInvitation.objects.filter(
            calibration_set=calibration_set, judge__in=judges
        ).values_list("judge_id", flat=True)
    )
    _invite(
        admin=admin,
        calibration_set=calibration_set,
        judges=[j for j in judges if j.pk not in already],
    )
    return len(judges) - len(already)


@transaction.atomic
def calibration_invitation_withdraw(
    *, admin, calibration_set: CalibrationSet, judge_id
) -> None:
    """Withdraw a physician's invitation: the set disappears from their pages.
    Their judgments so far stay in the report."""
    require_admin(admin, "withdraw calibration invitations")
    pk = id_parse(judge_id)
    if pk is None:
        raise ValidationError("No such judge invited to this set.")
    deleted, _ = CalibrationInvitation.objects.filter(
        calibration_set=calibration_set, judge_id=pk
    ).delete()
    if not deleted:
        raise ValidationError("No such judge invited to this set.")


def calibration_invitations(*, admin, calibration_set: CalibrationSet) -> list:
    """The set's invitations by judge name, each with ``judged``: how many
    pairs the judge has judged."""
    require_admin(admin, "see calibration judges")
    return list(
        CalibrationInvitation.objects.filter(calibration_set=calibration_set)
        .select_related("judge", "invited_by")
        .annotate(
            judged=Count(
                "calibration_set__pairs__judgments",
                filter=Q(calibration_set__pairs__judgments__judge=F("judge")),
            )
        )
        .order_by("judge__username")
    )


def physicians_to_invite(*, admin, calibration_set: CalibrationSet) -> list:
    """Active physicians not invited to the set yet, by username."""
    from annotation.selectors import physicians_all

    require_admin(admin, "invite calibration judges")
    invited = CalibrationInvitation.objects.filter(
        calibration_set=calibration_set
    ).values("judge_id")
    return list(physicians_all().exclude(pk__in=invited))
