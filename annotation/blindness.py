"""Blindness (spec section 4), in one place: until a window is closed, nothing
written by another rater of it reaches a rater of it, in any campaign. Every
read that shows one physician's words to another goes through these selectors:
the annotation pages (own assignments only), term suggestions, calibration
pairs, and the adjudication pages of an admin who also rates. Releases are for
researchers and admins only, and not while they rate open windows
(exports.roles).

When a window closes, in a campaign: the first time its consensus is built with
no open dispute (``CampaignWindow.closed_at``, set by annotation.consensus).
That is when every rater agreed on the status and every item (closed as
agreed, with no admin step), or when an admin decided the last open dispute
(adjudicated). It stays closed: a later recompute (another tau) that finds new
disputes sends them to adjudication but does not reopen the window.

A closed window's labels are final: authors can no longer reopen them
(``annotation.services.label_reopen``), so its raters may then compare, and
their words may reach each other (suggestions, calibration). A rater who still
has the window open elsewhere (another campaign, or added after it closed)
stays blind to it: closing is per campaign, blindness per rater.

Rules derived from it, each a selector below:

- A physician's *blind windows*: windows on which they hold an assignment (any
  campaign, active or not) that is not both submitted and closed.
- Their *co-raters*: everyone else holding an assignment of a blind window, in
  any campaign.
- Nothing a co-rater wrote, on any window, reaches the physician: a text can be
  reused on another window (issue 12), so leaving out only the shared window's
  labels is not enough. Term suggestions leave out every label of a co-rater;
  calibration pairs leave out every text a co-rater wrote (compared by
  ``text_key``).
- Calibration pairs are drawn from closed windows, or from windows none of the
  judges is blind to, without the judges' co-raters' texts; a judge is shown
  only the pairs that pass the rule for them at the time of asking
  (assignments change after a draw), and only sets an admin invited them to.
- An admin who also rates is blind like a physician: a window whose labels (in
  the campaign) include one by a co-rater is *withheld* from their
  adjudication. It is left out of their queue, its workspace and its partials
  answer 403, and they may not decide, merge or recompute it: another admin
  does. Every window they rate and is not closed is withheld (its other raters
  are co-raters), and so is any window a co-rater labelled, since a text can be
  reused. A blind workspace would leave nothing to decide from, and deciding a
  dispute over one's own label is not independent (spec section 4).
- A submitted label cannot be reopened once the co-raters' labels of its window
  can reach its author (``co_rater_labels_visible``): when the window closes,
  or, for an admin, when its adjudication is not withheld from them.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet

from accounts.roles import user_is_admin, user_is_physician
from annotation.models import (
    Assignment,
    AssignmentState,
    CalibrationInvitation,
    CalibrationPair,
    CalibrationSet,
    CampaignWindow,
    Label,
)

# The free-text fields of a label: what one physician writes in words.
TEXT_FIELDS = ("acute_problems", "added_actions", "red_flags")


def text_key(text: str) -> str:
    """A text as compared for blindness: case and spacing ignored (the same
    grouping as the suggestions)."""
    return " ".join((text or "").lower().split())


# Closing ----------------------------------------------------------------------


def campaign_windows_closed() -> QuerySet[CampaignWindow]:
    """Every (campaign, window) that is closed."""
    return CampaignWindow.objects.filter(
        Q(closed_at__isnull=False) | Q(adjudicated_at__isnull=False)
    )


def window_is_closed(*, campaign_id: int, window_id: int) -> bool:
    return (
        campaign_windows_closed()
        .filter(campaign_id=campaign_id, window_id=window_id)
        .exists()
    )


# Who is blind to what ---------------------------------------------------------


def own_assignments(user) -> QuerySet[Assignment]:
    """The physician's active assignments: the only labels and windows the
    physician's pages read. None for anyone else."""
    if not user_is_physician(user):
        return Assignment.objects.none()
    return Assignment.objects.filter(annotator=user, active=True)


def blind_assignments(user) -> QuerySet[Assignment]:
    """The user's assignments, in any campaign and active or not, that are not
    both submitted and closed: each keeps the user blind to its window."""
    if user is None or not getattr(user, "pk", None):
        return Assignment.objects.none()
    closed = campaign_windows_closed().filter(
        campaign_id=OuterRef("campaign_id"), window_id=OuterRef("window_id")
    )
    return (
        Assignment.objects.filter(annotator=user)
        .annotate(closed=Exists(closed))
        .filter(~Q(state=AssignmentState.SUBMITTED) | Q(closed=False))
    )


def blind_window_ids(user) -> QuerySet:
    """Ids of the windows the user is blind to (a subquery)."""
    return blind_assignments(user).values("window_id")


def co_rater_ids(user) -> QuerySet:
    """Ids of everyone else assigned (any campaign, active or not) a window the
    user is blind to (a subquery)."""
    return (
        Assignment.objects.filter(window_id__in=blind_window_ids(user))
        .exclude(annotator=user)
        .values("annotator_id")
    )


def hidden_text_keys(users: Iterable) -> set[str]:
    """The texts (as ``text_key``) written, draft or submitted, anywhere, by a
    co-rater of one of ``users``: none of them may be shown to that user, since
    a text reused on another window is still the co-rater's word on the shared
    one."""
    written_by_co_rater = Q(pk__in=[])
    for user in users:
        written_by_co_rater |= Q(assignment__annotator_id__in=co_rater_ids(user))
    keys: set[str] = set()
    labels = Label.objects.filter(written_by_co_rater)
    for payload in labels.values_list("payload", flat=True):
        for field in TEXT_FIELDS:
            for item in (payload or {}).get(field) or []:
                if isinstance(item, dict) and item.get("text"):
                    keys.add(text_key(item["text"]))
    return keys


# Term suggestions -------------------------------------------------------------


def suggestion_labels(*, user, campaign) -> QuerySet[Label]:
    """The labels of the campaign whose texts may be suggested to the user: the
    user's own (drafts too) and others' submitted ones, without any label of a
    co-rater."""
    return (
        Label.objects.filter(assignment__campaign=campaign)
        .filter(
            Q(assignment__annotator=user)
            | Q(assignment__state=AssignmentState.SUBMITTED)
        )
        .exclude(assignment__annotator_id__in=co_rater_ids(user))
    )


# Calibration ------------------------------------------------------------------


def calibration_labels(*, campaigns, judges: Iterable) -> QuerySet[Label]:
    """The submitted labels of the campaigns a calibration set may draw items
    from, for these judges: those of closed windows, and those of windows none
    of the judges is blind to. Without judges, closed windows only. The texts
    of the judges' co-raters are left out by the caller (``hidden_text_keys``),
    since the same text can sit in another label."""
    judges = list(judges)
    closed = campaign_windows_closed().filter(
        campaign_id=OuterRef("assignment__campaign_id"),
        window_id=OuterRef("assignment__window_id"),
    )
    eligible = Q(Exists(closed))
    if judges:
        seen_by_no_judge = Q()
        for judge in judges:
            seen_by_no_judge &= ~Q(assignment__window_id__in=blind_window_ids(judge))
        eligible |= seen_by_no_judge
    return Label.objects.filter(
        assignment__campaign__in=campaigns,
        assignment__state=AssignmentState.SUBMITTED,
    ).filter(eligible)


def calibration_sets_visible_to(user) -> QuerySet[CalibrationSet]:
    """All sets for an admin; for a physician, the sets an admin invited them
    to judge; none for anyone else."""
    if user_is_admin(user):
        return CalibrationSet.objects.all()
    if not user_is_physician(user):
        return CalibrationSet.objects.none()
    return CalibrationSet.objects.filter(
        pk__in=CalibrationInvitation.objects.filter(judge=user).values(
            "calibration_set_id"
        )
    )


def calibration_pairs_visible_to(
    *, user, calibration_set: CalibrationSet
) -> QuerySet[CalibrationPair]:
    """The pairs of the set the user may be shown now: none of a set the user
    may not see, and never one carrying a text a co-rater of the user wrote."""
    pairs = CalibrationPair.objects.filter(calibration_set=calibration_set)
    if not calibration_sets_visible_to(user).filter(pk=calibration_set.pk).exists():
        return pairs.none()
    hidden = hidden_text_keys([user])
    if not hidden:
        return pairs
    shown = [
        pk
        for pk, a, b in pairs.values_list("pk", "text_a", "text_b")
        if text_key(a) not in hidden and text_key(b) not in hidden
    ]
    return pairs.filter(pk__in=shown)


# Adjudication -----------------------------------------------------------------

ADJUDICATION_WITHHELD = (
    "You rate this window, or one of its raters shares a window with you that "
    "is still open: its labels are withheld from you until your shared windows "
    "close (blindness), so another admin adjudicates it."
)


def adjudication_withheld_window_ids(*, user, campaign_id) -> QuerySet:
    """Ids of the campaign's windows withheld from the user's adjudication (a
    subquery): a label of the window in the campaign (any assignment, active
    or not) is by a co-rater of the user. Nothing for a user who rates no
    open window."""
    return Assignment.objects.filter(
        campaign_id=campaign_id, annotator_id__in=co_rater_ids(user)
    ).values("window_id")


def adjudication_withheld(*, user, campaign_id, window_id) -> bool:
    """Whether the window's adjudication in the campaign is withheld from the
    user (``adjudication_withheld_window_ids``)."""
    return Assignment.objects.filter(
        campaign_id=campaign_id,
        window_id=window_id,
        annotator_id__in=co_rater_ids(user),
    ).exists()


def adjudication_require_not_withheld(*, user, campaign_id, window_id) -> None:
    """PermissionDenied, saying why, when the window's adjudication is withheld
    from the user: the guard of every adjudication read and write."""
    if adjudication_withheld(user=user, campaign_id=campaign_id, window_id=window_id):
        raise PermissionDenied(ADJUDICATION_WITHHELD)


def labels_shown_to_admin(user) -> QuerySet[Label]:
    """The labels an admin's pages outside adjudication (Django's admin site)
    may show the user: every label but a co-rater's."""
    return Label.objects.exclude(assignment__annotator_id__in=co_rater_ids(user))


def co_rater_labels_visible(*, user, campaign_id, window_id) -> bool:
    """Whether the other raters' labels of the window in the campaign can reach
    the user now: the window is closed there, or the user is an admin from
    whom its adjudication is not withheld. From then on the user's own label
    of it is final (``annotation.services.label_reopen``)."""
    if window_is_closed(campaign_id=campaign_id, window_id=window_id):
        return True
    return user_is_admin(user) and not adjudication_withheld(
        user=user, campaign_id=campaign_id, window_id=window_id
    )


__all__ = [
    "ADJUDICATION_WITHHELD",
    "TEXT_FIELDS",
    "adjudication_require_not_withheld",
    "adjudication_withheld",
    "adjudication_withheld_window_ids",
    "blind_assignments",
    "blind_window_ids",
    "calibration_labels",
    "calibration_pairs_visible_to",
    "calibration_sets_visible_to",
    "campaign_windows_closed",
    "co_rater_ids",
    "co_rater_labels_visible",
    "hidden_text_keys",
    "labels_shown_to_admin",
    "own_assignments",
    "suggestion_labels",
    "text_key",
    "window_is_closed",
]
