"""Reads of a campaign's disputed windows (spec section 4): the adjudication
queue, what is withheld from an admin who also rates (annotation.blindness), and
one window's labels, agreement, consensus and decisions for the adjudication
page."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from accounts.roles import user_is_admin
from annotation import blindness
from annotation.models import (
    AdjudicationDecision,
    Campaign,
    CampaignPhysician,
    CampaignWindow,
    ConsensusLabel,
    Label,
    WindowAgreement,
)
from annotation.selectors import campaign_get_for_admin, campaign_window_get
from windows.models import Window


def _disputed(campaign: Campaign):
    return ConsensusLabel.objects.filter(
        campaign=campaign, dropped=False, dispute_count__gt=0
    )


def adjudication_queue(*, admin, campaign: Campaign) -> list:
    """The campaign's windows with open disputes that the admin may adjudicate,
    each with its consensus (whose ``open_disputes`` list exactly what needs a
    decision), in window order. Windows withheld from an admin who also rates
    (annotation.blindness) are left out: ``adjudication_withheld_count``."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see the adjudication queue.")
    return list(
        _disputed(campaign)
        .exclude(
            window_id__in=blindness.adjudication_withheld_window_ids(
                user=admin, campaign_id=campaign.pk
            )
        )
        .select_related("window", "window__stay", "agreement")
        .order_by("window__stay_id", "window__index")
    )


def adjudication_withheld_count(*, admin, campaign: Campaign) -> int:
    """How many of the campaign's windows with open disputes are withheld from
    the admin (annotation.blindness): another admin adjudicates them. Which
    ones, and their disputes, are not said."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see the adjudication queue.")
    return (
        _disputed(campaign)
        .filter(
            window_id__in=blindness.adjudication_withheld_window_ids(
                user=admin, campaign_id=campaign.pk
            )
        )
        .count()
    )


def adjudication_queue_page(*, admin, campaign_id) -> dict:
    """What the adjudication queue page shows: the campaign, its queue
    (``adjudication_queue``) and how many disputed windows are withheld from
    the admin. Http404 for another id or a non-admin."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    return {
        "campaign": campaign,
        "queue": adjudication_queue(admin=admin, campaign=campaign),
        "withheld": adjudication_withheld_count(admin=admin, campaign=campaign),
    }


def adjudication_target(*, admin, campaign_id, window_id, physician_id=None) -> dict:
    """The campaign and window an adjudication decision is posted for
    (``adjudication_window_get``: Http404 or PermissionDenied as there), and
    the campaign's physician ``physician_id`` names (None when it names none
    of them) for a request of a third rater."""
    campaign = campaign_get_for_admin(admin=admin, campaign_id=campaign_id)
    window = adjudication_window_get(
        admin=admin, campaign=campaign, window_id=window_id
    )
    membership = (
        CampaignPhysician.objects.filter(campaign=campaign, user_id=physician_id)
        .select_related("user")
        .first()
        if physician_id is not None
        else None
    )
    return {
        "campaign": campaign,
        "window": window,
        "physician": membership.user if membership is not None else None,
    }


def adjudication_window_get(*, admin, campaign: Campaign, window_id) -> Window:
    """A window of the campaign that the admin may adjudicate: Http404 for
    another id or a non-admin, PermissionDenied (saying why) for a window
    withheld from an admin who also rates (annotation.blindness)."""
    window = campaign_window_get(admin=admin, campaign=campaign, window_id=window_id)
    blindness.adjudication_require_not_withheld(
        user=admin, campaign_id=campaign.pk, window_id=window.pk
    )
    return window


def window_adjudication_get(*, admin, campaign: Campaign, window_id) -> dict:
    """Everything the adjudication page shows for one window: each physician's
    label, the agreement (items grouped by meaning), the consensus with its open
    disputes, and the decisions so far. PermissionDenied for a window withheld
    from the admin (annotation.blindness)."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can adjudicate.")
    campaign_window = (
        CampaignWindow.objects.filter(campaign=campaign, window_id=window_id)
        .select_related("window", "window__stay")
        .first()
    )
    if campaign_window is None:
        raise Http404("No such window in this campaign.")
    window = campaign_window.window
    blindness.adjudication_require_not_withheld(
        user=admin, campaign_id=campaign.pk, window_id=window.pk
    )
    return {
        "campaign_window": campaign_window,
        "window": window,
        "labels": list(
            Label.objects.filter(
                assignment__campaign=campaign, assignment__window=window
            )
            .select_related("assignment", "assignment__annotator")
            .order_by("pk")
        ),
        "agreement": WindowAgreement.objects.filter(
            campaign=campaign, window=window
        ).first(),
        "consensus": ConsensusLabel.objects.filter(
            campaign=campaign, window=window
        ).first(),
        "decisions": list(
            AdjudicationDecision.objects.filter(campaign=campaign, window=window)
            .select_related("author")
            .order_by("created_at", "pk")
        ),
    }
