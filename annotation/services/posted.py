"""The admin and judging pages' posts as one call each: what the ids name,
resolved with the user's scope, then the write. Adjudication: the campaign and
window (and a third rater), Http404 and PermissionDenied as
``annotation.selectors.disputes.adjudication_target``, then the decision or the
merge (annotation.services.adjudication); the recompute's start
(annotation.services.recompute); a calibration judgment
(annotation.calibration_judging)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from annotation.calibration_judging import calibration_judge, calibration_set_get
from annotation.models import (
    AdjudicationDecision,
    AgreementRecompute,
    CalibrationJudgment,
)
from annotation.selectors import campaign_get_for_admin
from annotation.selectors.disputes import adjudication_target
from annotation.services.adjudication import adjudication_decide, adjudication_merge
from annotation.services.recompute import agreement_recompute_start


def adjudication_decide_posted(
    *, admin, campaign_id, window_id, physician_id=None, third_rater=False, **posted
) -> AdjudicationDecision:
    """Decide one dispute of the window (``adjudication_decide``); a request of a
    third rater that names no physician of the campaign is refused."""
    target = adjudication_target(
        admin=admin,
        campaign_id=campaign_id,
        window_id=window_id,
        physician_id=physician_id if third_rater else None,
    )
    if third_rater and target["physician"] is None:
        raise ValidationError("Choose a physician of this campaign.")
    return adjudication_decide(admin=admin, **target, **posted)


def adjudication_merge_posted(
    *, admin, campaign_id, window_id, **posted
) -> AdjudicationDecision:
    """Merge items of one task of the window into one wording
    (``adjudication_merge``)."""
    target = adjudication_target(
        admin=admin, campaign_id=campaign_id, window_id=window_id
    )
    return adjudication_merge(
        admin=admin, campaign=target["campaign"], window=target["window"], **posted
    )


def agreement_recompute_posted(*, admin, campaign_id) -> AgreementRecompute:
    """Start the campaign's recompute (``agreement_recompute_start``); Http404
    for another id or a non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    return agreement_recompute_start(admin=admin, campaign=campaign)


def calibration_judge_posted(*, judge, set_id, pair_id, same) -> CalibrationJudgment:
    """Record the judge's judgment of a pair of the set the id names
    (``calibration_judge``); Http404 for a set the judge may not see."""
    calibration_set = calibration_set_get(user=judge, set_id=set_id)
    return calibration_judge(
        judge=judge, calibration_set=calibration_set, pair_id=pair_id, same=same
    )
