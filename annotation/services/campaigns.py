"""Writes of Gold campaigns: create a campaign (a seeded draw of windows, its
assignments), change its critical action rules, add, reassign and start
adjudicating its windows."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import physicians_only, require_admin
from annotation.assigning import balanced_rater_sets, windows_draw
from annotation.critical import (
    critical_action_rules_clean,
    default_critical_action_rules,
)
from annotation.models import (
    Assignment,
    AssignmentState,
    Campaign,
    CampaignKind,
    CampaignPhysician,
    CampaignWindow,
)
from annotation.selectors import gold_windows_of
from windows.models import Window


def _windows_resolve(windows: Iterable) -> list[Window]:
    ids = [w.pk if isinstance(w, Window) else w for w in windows]
    try:
        ids = list(dict.fromkeys(int(pk) for pk in ids))
    except (TypeError, ValueError):
        raise ValidationError(
            "Windows must be given as windows or window ids."
        ) from None
    if not ids:
        raise ValidationError("Choose at least one window for the campaign.")
    found = list(
        Window.objects.filter(pk__in=ids)
        .select_related("stay")
        .order_by("stay_id", "index")
    )
    if len(found) != len(ids):
        missing = sorted(set(ids) - {w.pk for w in found})
        raise ValidationError(
            f"{len(missing)} of the chosen windows do not exist "
            f"(ids {', '.join(map(str, missing[:5]))})."
        )
    not_gold = [w for w in found if not w.sampled_gold]
    if not_gold:
        raise ValidationError(
            f"Only sampled Gold windows can be labelled in a Gold campaign; "
            f"{len(not_gold)} of the chosen windows are not (first: {not_gold[0]})."
        )
    return found


def _count_clean(value, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(
            f"The number of {what} must be a whole number of 1 or more."
        )
    return value


def _windows_choose(
    found: list[Window],
    *,
    window_count: int | None,
    stay_count: int | None,
    seed: int,
) -> list[Window]:
    """The drawn windows (``annotation.assigning.windows_draw``), after checking
    that the counts can be met, with a message saying what is available."""
    window_count = _count_clean(window_count, "windows")
    stay_count = _count_clean(stay_count, "stays")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError("The seed must be a whole number.")
    by_stay: dict[tuple, list[Window]] = {}
    for window in found:
        by_stay.setdefault((window.stay.source, window.stay.source_id), []).append(
            window
        )
    if window_count is not None and window_count > len(found):
        raise ValidationError(
            f"{window_count:,} windows asked for, but only {len(found):,} sampled "
            f"Gold windows are available (in {len(by_stay):,} stays)."
        )
    if stay_count is not None:
        if stay_count > len(by_stay):
            raise ValidationError(
                f"{stay_count:,} stays asked for, but the sampled Gold windows "
                f"come from only {len(by_stay):,} stays."
            )
        if window_count is not None and window_count < stay_count:
            raise ValidationError(
                f"{stay_count:,} stays need at least {stay_count:,} windows (one "
                f"each); {window_count:,} asked for."
            )
    drawn = windows_draw(
        windows_by_stay=by_stay,
        seed=seed,
        window_count=window_count,
        stay_count=stay_count,
    )
    if window_count is not None and len(drawn) < window_count:
        raise ValidationError(
            f"The {stay_count:,} stays drawn with seed {seed} hold only "
            f"{len(drawn):,} Gold windows; ask for at most {len(drawn):,} windows, "
            "or for more stays."
        )
    # Rater sets follow this order, as the queues do: by stay, then index.
    return sorted(drawn, key=lambda w: (w.stay_id, w.index))


def _physicians_resolve(physicians: Iterable) -> list:
    return physicians_only(
        physicians,
        refusal=lambda names, one: (
            "Only physicians can be assigned windows; "
            f"{names} {'has' if one else 'have'} no physician role."
        ),
    )


@transaction.atomic
def campaign_create(
    *,
    admin,
    name: str,
    windows: Iterable,
    physicians: Iterable,
    annotators_per_window: int = 2,
    window_count: int | None = None,
    stay_count: int | None = None,
    seed: int = 0,
    evidence_required: bool = True,
    critical_action_categories: list[dict] | None = None,
) -> Campaign:
    """Create a Gold campaign and assign its windows.

    Of the given windows, ``window_count`` are drawn with ``seed`` from
    ``stay_count`` stays, balanced over the stays (``windows_draw``; None takes
    every window, or every stay). Windows are taken in stay order, so a stay's
    windows sit together in the queues; rater sets come from
    ``balanced_rater_sets`` (loads within one, pairs of physicians sharing
    windows). Physicians are indexed by id, so the same
    inputs give the same assignments.
    """
    require_admin(admin, "create a campaign")
    name = (name or "").strip()
    if not name:
        raise ValidationError("Give the campaign a name.")
    if Campaign.objects.filter(name=name).exists():
        raise ValidationError(f'A campaign named "{name}" already exists.')
    window_list = _windows_choose(
        _windows_resolve(windows),
        window_count=window_count,
        stay_count=stay_count,
        seed=seed,
    )
    users = _physicians_resolve(physicians)
    if not isinstance(annotators_per_window, int) or annotators_per_window < 1:
        raise ValidationError(
            "Annotators per window must be a whole number of 1 or more."
        )
    if len(users) < annotators_per_window:
        raise ValidationError(
            f"{annotators_per_window} annotators per window need at least "
            f"{annotators_per_window} physicians; {len(users)} chosen."
        )
    rules = critical_action_rules_clean(
        default_critical_action_rules()
        if critical_action_categories is None
        else critical_action_categories
    )
    campaign = Campaign.objects.create(
        name=name,
        kind=CampaignKind.GOLD,
        created_by=admin,
        annotators_per_window=annotators_per_window,
        evidence_required=bool(evidence_required),
        critical_action_categories=rules,
    )
    CampaignPhysician.objects.bulk_create(
        CampaignPhysician(campaign=campaign, user=u) for u in users
    )
    CampaignWindow.objects.bulk_create(
        CampaignWindow(campaign=campaign, window=w) for w in window_list
    )
    rater_sets = balanced_rater_sets(
        physicians=len(users),
        windows=len(window_list),
        per_window=annotators_per_window,
    )
    Assignment.objects.bulk_create(
        Assignment(
            campaign=campaign, window=window, annotator=users[i], assigned_by=admin
        )
        for window, raters in zip(window_list, rater_sets, strict=True)
        for i in raters
    )
    return campaign


def campaign_create_from_cohort(*, admin, cohort, **fields) -> Campaign:
    """``campaign_create`` over the sampled Gold windows of the cohort's stays,
    or every sampled Gold window when ``cohort`` is None: the new-campaign
    form's choice."""
    return campaign_create(
        admin=admin,
        windows=gold_windows_of(cohort=cohort).values_list("pk", flat=True),
        **fields,
    )


@transaction.atomic
def campaign_critical_categories_set(
    *, admin, campaign: Campaign, rules: list[dict]
) -> Campaign:
    """Change which recorded actions are shown for rating. Labels already
    submitted keep their ratings; new submits are checked against the new rules."""
    require_admin(admin, "change the critical action categories")
    campaign.critical_action_categories = critical_action_rules_clean(rules)
    campaign.save(update_fields=["critical_action_categories"])
    return campaign


def _campaign_window_get(*, campaign: Campaign, window: Window) -> CampaignWindow:
    campaign_window = CampaignWindow.objects.filter(
        campaign=campaign, window=window
    ).first()
    if campaign_window is None:
        raise ValidationError(f"{window} is not part of the campaign {campaign}.")
    return campaign_window


@transaction.atomic
def assignment_add(
    *, admin, window: Window, campaign: Campaign, physician
) -> Assignment:
    """Give a window of the campaign to one more physician (e.g. a third rater on
    disagreement)."""
    require_admin(admin, "assign windows")
    _campaign_window_get(campaign=campaign, window=window)
    (user,) = _physicians_resolve([physician])
    existing = (
        Assignment.objects.select_for_update()
        .filter(campaign=campaign, window=window, annotator=user)
        .first()
    )
    if existing is not None and existing.active:
        raise ValidationError(
            f"{user.get_username()} is already assigned {window} in this campaign."
        )
    CampaignPhysician.objects.get_or_create(campaign=campaign, user=user)
    if existing is not None:
        # Taken from this physician earlier: give it back, with their work on it.
        existing.active = True
        existing.deactivated_at = None
        existing.assigned_by = admin
        existing.save(update_fields=["active", "deactivated_at", "assigned_by"])
        return existing
    return Assignment.objects.create(
        campaign=campaign, window=window, annotator=user, assigned_by=admin
    )


@transaction.atomic
def assignment_reassign(*, admin, assignment: Assignment, physician) -> Assignment:
    """Move an abandoned window to another physician. The old assignment stays,
    inactive, with whatever draft it had; the new one starts empty (blindness)
    and points back to it."""
    require_admin(admin, "reassign windows")
    (user,) = _physicians_resolve([physician])
    old = Assignment.objects.select_for_update().get(pk=assignment.pk)
    if not old.active:
        raise ValidationError("This assignment was already reassigned.")
    if old.state == AssignmentState.SUBMITTED:
        raise ValidationError(
            "This window's label is already submitted; add another physician "
            "to the window instead of reassigning it."
        )
    if old.annotator_id == user.pk:
        raise ValidationError(
            f"The window is already assigned to {user.get_username()}."
        )
    taken = Assignment.objects.filter(
        campaign_id=old.campaign_id, window_id=old.window_id, annotator=user
    ).first()
    if taken is not None and taken.active:
        raise ValidationError(
            f"{user.get_username()} is already assigned this window in this campaign."
        )
    if taken is not None:
        raise ValidationError(
            f"This window was taken from {user.get_username()} before; add them "
            "back to it instead."
        )
    old.active = False
    old.deactivated_at = timezone.now()
    old.save(update_fields=["active", "deactivated_at"])
    CampaignPhysician.objects.get_or_create(campaign_id=old.campaign_id, user=user)
    return Assignment.objects.create(
        campaign_id=old.campaign_id,
        window_id=old.window_id,
        annotator=user,
        assigned_by=admin,
        reassigned_from=old,
    )


@transaction.atomic
def campaign_window_adjudication_start(
    *, admin, campaign: Campaign, window: Window
) -> CampaignWindow:
    """Mark that adjudication of the window has started: from now on its authors
    can no longer reopen their labels. Idempotent."""
    require_admin(admin, "adjudicate")
    campaign_window = _campaign_window_get(campaign=campaign, window=window)
    if campaign_window.adjudication_started_at is None:
        campaign_window.adjudication_started_at = timezone.now()
        campaign_window.save(update_fields=["adjudication_started_at"])
    return campaign_window
