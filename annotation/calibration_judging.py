"""Judging a calibration set (spec section 5): the sets a physician may judge
and the next pair to judge, each judgment, the sweep report over the
judgments, and the admin adopting a tau for the model from it (recorded with
who, when and which report). Which pairs a judge is shown is blindness's
(annotation.blindness); drawing the pairs and inviting the judges is
annotation.calibration's."""

from __future__ import annotations

import math

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Q
from django.http import Http404
from django.utils import timezone

from accounts.ids import id_parse
from accounts.roles import require_admin, user_is_admin, user_is_physician
from annotation import blindness
from annotation.calibration import calibration_invitations, physicians_to_invite
from annotation.models import (
    CalibrationJudgment,
    CalibrationPair,
    CalibrationSet,
    CalibrationStratum,
    Campaign,
    TauAdoption,
)
from annotation.selectors import physicians_all
from evaluation.calibration import best_row, majority, sweep_taus, tau_sweep
from evaluation.matcher import SemanticMatcher
from evaluation.models import MatcherModel

# Judging ----------------------------------------------------------------------


def _may_judge(user) -> bool:
    return user_is_physician(user) or user_is_admin(user)


def calibration_sets_for(*, user) -> list[CalibrationSet]:
    """The sets the user may judge, newest first (all for an admin, the sets a
    physician is invited to), each with ``pairs_total`` (the pairs the user may
    be shown) and ``judged_by_user``; Http404 for anyone but physicians and
    admins."""
    if not _may_judge(user):
        raise Http404("No such page.")
    sets = list(
        blindness.calibration_sets_visible_to(user).annotate(
            judged_by_user=Count(
                "pairs__judgments",
                filter=Q(pairs__judgments__judge=user),
                distinct=True,
            ),
        )
    )
    for calibration_set in sets:
        calibration_set.pairs_total = blindness.calibration_pairs_visible_to(
            user=user, calibration_set=calibration_set
        ).count()
    return sets


def calibration_list_page(*, user) -> dict:
    """What the list of calibration sets shows the user: the sets they may
    judge (``calibration_sets_for``) and, for an admin, the campaigns and
    physicians the form to draw a set offers."""
    is_admin = user_is_admin(user)
    return {
        "sets": calibration_sets_for(user=user),
        "is_admin": is_admin,
        "campaigns": Campaign.objects.order_by("name") if is_admin else [],
        "physicians": list(physicians_all()) if is_admin else [],
    }


def calibration_set_get(*, user, set_id, admin_only: bool = False) -> CalibrationSet:
    """The calibration set; Http404 for an unknown id or a user who may not see
    it (judges: admins and the physicians invited to it; the report: admins)."""
    if admin_only:
        sets = CalibrationSet.objects.all() if user_is_admin(user) else None
    else:
        sets = blindness.calibration_sets_visible_to(user)
    found = sets.filter(pk=set_id).first() if sets is not None else None
    if found is None:
        raise Http404("No such calibration set.")
    return found


def calibration_next_pair(*, user, calibration_set: CalibrationSet) -> dict:
    """The first pair of the set the user may be shown and has not judged (None
    when done), with how many of those they have judged and their total."""
    pairs = blindness.calibration_pairs_visible_to(
        user=user, calibration_set=calibration_set
    )
    judged = pairs.filter(judgments__judge=user)
    return {
        "pair": pairs.exclude(pk__in=judged.values("pk")).order_by("position").first(),
        "judged": judged.count(),
        "total": pairs.count(),
    }


def calibration_judge(
    *, judge, calibration_set: CalibrationSet, pair_id, same
) -> CalibrationJudgment:
    """Record (or replace) the judge's same / different judgment of a pair the
    judge may be shown."""
    if not _may_judge(judge):
        raise PermissionDenied("Only physicians and admins judge calibration pairs.")
    if (
        not blindness.calibration_sets_visible_to(judge)
        .filter(pk=calibration_set.pk)
        .exists()
    ):
        raise PermissionDenied("Only the physicians invited to this set judge it.")
    if same not in (True, False):
        raise ValidationError("Judge the pair as the same item or different items.")
    pk = id_parse(pair_id)
    if pk is None:
        raise ValidationError("No such pair in this calibration set.")
    pair = (
        blindness.calibration_pairs_visible_to(
            user=judge, calibration_set=calibration_set
        )
        .filter(pk=pk)
        .first()
    )
    if pair is None:
        raise ValidationError("No such pair in this calibration set.")
    judgment, _ = CalibrationJudgment.objects.update_or_create(
        pair=pair, judge=judge, defaults={"same": same, "judged_at": timezone.now()}
    )
    return judgment


# Report -----------------------------------------------------------------------


def calibration_report(*, admin, calibration_set: CalibrationSet, taus=None) -> dict:
    """The sweep of tau over the set's judged pairs (the paper's Table 8).

    A pair's truth is its judges' majority (``evaluation.calibration.majority``);
    tied pairs are left out and counted. The similarities are those stored at
    draw time, under the set's model (guarded by polarity in sets drawn since
    the guard: an opposite pair's -1 matches at no tau). Also: the best row
    (highest F1), the pairs per stratum and their share judged the same, and
    the tau in force for the model with where it comes from.
    """
    require_admin(admin, "see calibration reports")
    # Plain tuples, not a model instance per pair and per judgment: a set of
    # 360 pairs judged three times made some 1,500 objects a view, enough to
    # set off the garbage collector's full pass (about 140 ms) every few views.
    pairs = list(
        CalibrationPair.objects.filter(calibration_set=calibration_set)
        .order_by("position")
        .values_list("pk", "stratum", "cosine")
    )
    votes: dict[int, list[bool]] = {}
    judges = set()
    for pair_id, judge_id, same in CalibrationJudgment.objects.filter(
        pair__calibration_set=calibration_set
    ).values_list("pair_id", "judge_id", "same"):
        votes.setdefault(pair_id, []).append(same)
        judges.add(judge_id)
    cosines, truths = [], []
    tied = unjudged = 0
    strata = {
        s: {"stratum": s, "label": label, "pairs": 0, "judged": 0, "same": 0}
        for s, label in CalibrationStratum.choices
    }
    for pair_id, stratum, cosine in pairs:
        judgments = votes.get(pair_id, [])
        strata[stratum]["pairs"] += 1
        if not judgments:
            unjudged += 1
            continue
        truth = majority(judgments)
        if truth is None:
            tied += 1
            continue
        strata[stratum]["judged"] += 1
        strata[stratum]["same"] += int(truth)
        cosines.append(cosine)
        truths.append(truth)
    rows = tau_sweep(cosines, truths, sweep_taus() if taus is None else taus)
    best = best_row(rows) if cosines else None
    in_force = SemanticMatcher(calibration_set.model_name)
    return {
        "calibration_set": calibration_set,
        "rows": [r.as_dict() for r in rows],
        "best": best.as_dict() if best else None,
        "pairs": len(pairs),
        "used": len(cosines),
        "tied": tied,
        "unjudged": unjudged,
        "judges": len(judges),
        "positives": sum(truths),
        "strata": list(strata.values()),
        "model_name": calibration_set.model_name,
        "current_tau": in_force.tau,
        "tau_source": in_force.tau_source,
        "adoptions": list(
            TauAdoption.objects.filter(calibration_set=calibration_set).select_related(
                "adopted_by", "matcher_model"
            )
        ),
    }


def calibration_report_page(*, admin, set_id) -> dict:
    """What the admin's report page shows of a set: the sweep
    (``calibration_report``), its invitations and the active physicians not
    invited yet. Http404 for another id or a non-admin."""
    calibration_set = calibration_set_get(user=admin, set_id=set_id, admin_only=True)
    return {
        "report": calibration_report(admin=admin, calibration_set=calibration_set),
        "invitations": calibration_invitations(
            admin=admin, calibration_set=calibration_set
        ),
        "physicians_to_invite": physicians_to_invite(
            admin=admin, calibration_set=calibration_set
        ),
    }


def calibration_invite_target(*, admin, set_id, judge_ids) -> dict:
    """The set physicians are invited to and the active physicians
    ``judge_ids`` names (unknown ids left out: they name no one).
    Http404 for another set or a non-admin."""
    return {
        "calibration_set": calibration_set_get(
            user=admin, set_id=set_id, admin_only=True
        ),
        "judges": list(physicians_all().filter(pk__in=judge_ids)),
    }


def _json_safe(value):
    """NaN (an undefined precision, say) as null: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _snapshot(report: dict) -> dict:
    return _json_safe(
        {
            key: report[key]
            for key in ("rows", "best", "pairs", "used", "tied", "unjudged", "judges")
        }
    )


def tau_adopt(
    *, admin, calibration_set: CalibrationSet, tau, reason: str = ""
) -> TauAdoption:
    """Set the set's model's tau (``MatcherModel.tau``) to one of the report's
    taus, recording who adopted it, when, the previous tau and the report.
    Agreements already computed keep the tau they were computed with until
    they are recomputed."""
    require_admin(admin, "adopt a tau")
    report = calibration_report(admin=admin, calibration_set=calibration_set)
    try:
        value = float(tau)
    except (TypeError, ValueError):
        raise ValidationError(
            "Choose the tau to adopt from the report's rows."
        ) from None
    if math.isnan(value):
        raise ValidationError("Choose the tau to adopt from the report's rows.")
    row = next((r for r in report["rows"] if abs(r["tau"] - value) < 1e-9), None)
    if row is None:
        raise ValidationError(
            f"tau {value:g} is not in the report; choose one of its rows "
            f"({report['rows'][0]['tau']:g} to {report['rows'][-1]['tau']:g})."
        )
    if not report["used"]:
        raise ValidationError(
            "No pair of this set has a judgment yet: a tau cannot be calibrated "
            "from nothing."
        )
    now = timezone.now()
    with transaction.atomic():
        model, created = MatcherModel.objects.select_for_update().get_or_create(
            name=calibration_set.model_name, defaults={"tau": value}
        )
        previous = None if created else model.tau
        model.tau = value
        model.calibrated_at = now
        model.notes = (
            f"tau {value:g} adopted by {admin.get_username()} on {now:%Y-%m-%d} from "
            f'calibration set "{calibration_set.name}": {report["used"]} judged '
            f"pairs, accuracy {row['accuracy']:.3f}, precision {row['precision']:.3f}, "
            f"recall {row['recall']:.3f}, F1 {row['f1']:.3f}."
        )
        model.save()
        return TauAdoption.objects.create(
            matcher_model=model,
            calibration_set=calibration_set,
            tau=value,
            previous_tau=previous,
            reason=(reason or "").strip(),
            report=_snapshot(report),
            adopted_by=admin,
            adopted_at=now,
        )
