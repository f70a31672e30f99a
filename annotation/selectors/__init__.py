"""Reads of the annotation app, each scoped to what the asking user may see:
physicians their own assignments and labels only, admins everything. What one
physician may read of another's words is decided in annotation.blindness
(spec section 4), never here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.http import Http404

from accounts.roles import Role, user_is_admin
from annotation import blindness
from annotation.models import (
    Assignment,
    AssignmentState,
    Campaign,
    CampaignPhysician,
    CampaignWindow,
    Label,
)
from annotation.selectors.labelling import (
    recorded_critical_actions,
    recorded_routine_actions,
)
from windows.models import Cohort, Window

# Queue ------------------------------------------------------------------------


class _SubmittedShare:
    """``done`` (assignments submitted, from ``counts`` by state) and its
    ``percent`` of ``total``."""

    counts: dict[str, int]
    total: int

    @property
    def done(self) -> int:
        return self.counts.get(AssignmentState.SUBMITTED, 0)

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


@dataclass
class PhysicianQueue(_SubmittedShare):
    """A physician's active assignments in labelling order, with progress."""

    assignments: list[Assignment]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.assignments)

    def next_after(self, assignment_id: int | None = None) -> Assignment | None:
        """The first assignment not yet submitted after ``assignment_id`` in queue
        order, wrapping round; None when all are submitted."""
        items = self.assignments
        start = 0
        if assignment_id is not None:
            for i, a in enumerate(items):
                if a.pk == assignment_id:
                    start = i + 1
                    break
        for a in items[start:] + items[:start]:
            if a.state != AssignmentState.SUBMITTED and a.pk != assignment_id:
                return a
        return None


def physician_queue(
    *, user, campaign: Campaign | None = None, details: bool = True
) -> PhysicianQueue:
    """The user's assigned windows, a stay's windows together (by campaign, stay,
    window index). Empty for anyone who is not a physician.

    ``details=False`` reads only each assignment's id and state, in the same
    order: enough for a position, the progress and the next window, which the
    annotation page and every submit need (one narrow query instead of a
    five-table join and a prefetch)."""
    qs = blindness.own_assignments(user)
    if campaign is not None:
        qs = qs.filter(campaign=campaign)
    if details:
        qs = qs.select_related(
            "campaign", "window", "window__stay", "window__stay__admission__patient"
        ).prefetch_related("label")
    else:
        qs = qs.only("id", "state")
    assignments = list(
        qs.order_by("campaign_id", "window__stay_id", "window__index", "id")
    )
    counts = Counter(a.state for a in assignments)
    return PhysicianQueue(
        assignments=assignments,
        counts={state: counts.get(state, 0) for state in AssignmentState.values},
    )


@dataclass
class QueueProgress(_SubmittedShare):
    """A physician's assignment counts by state (active assignments)."""

    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


QUEUE_ORDER = ("campaign_id", "window__stay_id", "window__index", "id")


def physician_queue_progress(*, user) -> QueueProgress:
    """The user's active assignments counted by state, in the database."""
    rows = (
        blindness.own_assignments(user)
        .order_by()
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    found = dict(rows)
    return QueueProgress(
        counts={state: found.get(state, 0) for state in AssignmentState.values}
    )


def physician_queue_page(*, user, page, per_page: int = 50) -> Page:
    """One page of the user's active assignments, the windows still to label
    first (in queue order: by campaign, stay, window index), the submitted ones
    after them; each with its campaign, window, stay, patient and label."""
    submitted_last = Case(
        When(state=AssignmentState.SUBMITTED, then=Value(1)),
        default=Value(0),
        output_field=IntegerField(),
    )
    assignments = (
        blindness.own_assignments(user)
        .select_related(
            "campaign", "window", "window__stay", "window__stay__admission__patient"
        )
        # The row shows when the label was saved, not what it says.
        .prefetch_related(
            Prefetch(
                "label",
                queryset=Label.objects.only(
                    "id", "assignment_id", "updated_at", "version"
                ),
            )
        )
        .order_by(submitted_last, *QUEUE_ORDER)
    )
    return Paginator(assignments, per_page).get_page(page)


def physician_queue_next(*, user) -> Assignment | None:
    """The first assignment not yet submitted in queue order: the one the queue's
    "next" opens (``PhysicianQueue.next_after(None)``, in one narrow query)."""
    return (
        blindness.own_assignments(user)
        .exclude(state=AssignmentState.SUBMITTED)
        .only("id", "state")
        .order_by(*QUEUE_ORDER)
        .first()
    )


def queue_page(*, user, page) -> dict:
    """What the physician's queue page shows: the progress (counted in the
    database), one page of assignments (``physician_queue_page``) and the next
    one to label."""
    return {
        "queue": physician_queue_progress(user=user),
        "page": physician_queue_page(user=user, page=page),
        "next_assignment": physician_queue_next(user=user),
    }


def assignment_get_for_annotator(*, annotator, assignment_id) -> Assignment:
    """The annotator's active assignment with its window and label; Http404 for
    any other id, existing or not, so ids cannot be probed."""
    try:
        pk = int(assignment_id)
    except (TypeError, ValueError):
        raise Http404("No such assignment.") from None
    assignment = (
        blindness.own_assignments(annotator)
        .select_related("campaign", "window", "window__stay")
        .filter(pk=pk)
        .first()
    )
    if assignment is None:
        raise Http404("No such assignment.")
    return assignment


def label_of(assignment: Assignment) -> Label | None:
    """The assignment's current label, None before its first save."""
    try:
        return assignment.label
    except Label.DoesNotExist:
        return None


def labelling_page(*, user, assignment_id, full: bool = True) -> dict:
    """What the labelling page shows of one of the physician's assignments: the
    assignment, its window as the trajectory reads it (``window_get``: with the
    stay's last index and dosing weight) and, unless ``full`` is false (the
    event table's partial), the saved label, the physician's queue, and the
    window's recorded actions to rate and those the campaign leaves out.
    Http404 for an assignment that is not the user's."""
    assignment = assignment_get_for_annotator(
        annotator=user, assignment_id=assignment_id
    )
    # Imported here: windows.selectors loads the concept tracks (pandas), which
    # a release build, importing annotation's services, does not need.
    from windows.selectors import window_get

    window = window_get(
        user=user, stay_id=assignment.window.stay_id, index=assignment.window.index
    )
    if window is None:
        raise Http404("No such window.")
    if not full:
        return {"assignment": assignment, "window": window}
    assignment.window = window
    return {
        "assignment": assignment,
        "window": window,
        "label": label_of(assignment),
        "queue": physician_queue(user=user, details=False),
        "critical_actions": list(recorded_critical_actions(assignment=assignment)),
        "routine_actions": list(recorded_routine_actions(assignment=assignment)),
    }


# Admin's view -----------------------------------------------------------------


def campaign_progress(*, admin, campaign: Campaign) -> dict:
    """Assignment counts per state for each physician and overall, windows fully
    submitted, and pairs of physicians that share no window yet."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's progress.")
    rows = (
        Assignment.objects.filter(campaign=campaign, active=True)
        .values("annotator_id", "annotator__username", "state")
        .annotate(n=Count("id"))
        .order_by("annotator__username")
    )
    physicians: dict[int, dict] = {}
    totals = {state: 0 for state in AssignmentState.values}
    for row in rows:
        entry = physicians.setdefault(
            row["annotator_id"],
            {
                "user_id": row["annotator_id"],
                "username": row["annotator__username"],
                **{state: 0 for state in AssignmentState.values},
            },
        )
        entry[row["state"]] += row["n"]
        totals[row["state"]] += row["n"]
    for entry in physicians.values():
        entry["total"] = sum(entry[s] for s in AssignmentState.values)

    windows = CampaignWindow.objects.filter(campaign=campaign)
    complete = (
        windows.annotate(
            raters=Count(
                "window__assignments",
                filter=Q(
                    window__assignments__campaign=campaign,
                    window__assignments__active=True,
                ),
            ),
            submitted=Count(
                "window__assignments",
                filter=Q(
                    window__assignments__campaign=campaign,
                    window__assignments__active=True,
                    window__assignments__state=AssignmentState.SUBMITTED,
                ),
            ),
        )
        .filter(raters__gt=0, raters=F("submitted"))
        .count()
    )

    members = list(
        CampaignPhysician.objects.filter(campaign=campaign)
        .order_by("user__username")
        .values_list("user_id", "user__username")
    )
    # Pairs of physicians actively on a same window: a self-join, one row a pair.
    shared = set(
        Assignment.objects.filter(
            campaign=campaign,
            active=True,
            window__assignments__campaign=campaign,
            window__assignments__active=True,
            window__assignments__annotator_id__gt=F("annotator_id"),
        )
        .order_by()
        .values_list("annotator_id", "window__assignments__annotator_id")
        .distinct()
    )
    names = dict(members)
    unshared = [
        (names[a], names[b])
        for a, b in combinations(sorted(names), 2)
        if (a, b) not in shared
    ]
    return {
        "campaign": campaign,
        "physicians": sorted(physicians.values(), key=lambda e: e["username"]),
        "totals": {**totals, "total": sum(totals.values())},
        "windows": windows.count(),
        "windows_complete": complete,
        "pairs_without_shared_window": unshared,
    }


def _count_per_campaign(queryset: QuerySet) -> Coalesce:
    """How many rows of ``queryset`` each campaign has: a correlated subquery,
    so that counts of several relations do not multiply each other's rows."""
    counted = (
        queryset.filter(campaign=OuterRef("pk"))
        .order_by()
        .values("campaign")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def campaign_list_with_progress(*, admin) -> QuerySet[Campaign]:
    """Every campaign, newest first, each with ``windows_total``,
    ``physicians_total``, ``assignments_total`` and ``assignments_submitted``
    (active assignments), in one query whatever the campaigns' sizes."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see the campaigns' progress.")
    active = Assignment.objects.filter(active=True)
    return Campaign.objects.annotate(
        windows_total=_count_per_campaign(CampaignWindow.objects.all()),
        physicians_total=_count_per_campaign(CampaignPhysician.objects.all()),
        assignments_total=_count_per_campaign(active),
        assignments_submitted=_count_per_campaign(
            active.filter(state=AssignmentState.SUBMITTED)
        ),
    ).order_by("-created_at", "-id")


def campaign_list_page(*, admin, page, per_page: int = 25) -> Page:
    """One page of ``campaign_list_with_progress``, each with ``percent`` of its
    labels submitted."""
    result = Paginator(campaign_list_with_progress(admin=admin), per_page).get_page(
        page
    )
    for campaign in result:
        total = campaign.assignments_total
        campaign.percent = (
            round(100 * campaign.assignments_submitted / total) if total else 0
        )
    return result


def campaign_get_for_admin(*, admin, campaign_id) -> Campaign:
    """The campaign; Http404 for anyone but an admin, as for an unknown id."""
    if not user_is_admin(admin):
        raise Http404("No such campaign.")
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


CAMPAIGN_WINDOWS_PER_PAGE = 50
CAMPAIGN_WINDOW_FILTERS = {
    "all": "All windows",
    "open": "Awaiting labels",
    "complete": "Fully submitted",
}


def campaign_windows_with_assignments(
    *, admin, campaign: Campaign, show: str = "all"
) -> QuerySet[CampaignWindow]:
    """The campaign's windows in stay order, each with ``campaign_assignments``:
    its assignments in this campaign (active first, then reassigned ones) with
    their annotators. ``show``: "open" keeps the windows with an active
    assignment not yet submitted, "complete" the others. Lazy: slice it (a page)
    before it is read."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's assignments.")
    assignments = (
        Assignment.objects.filter(campaign=campaign)
        .select_related("annotator")
        .order_by("-active", "annotator__username", "pk")
    )
    windows = (
        CampaignWindow.objects.filter(campaign=campaign)
        .select_related("window")
        .prefetch_related(
            Prefetch(
                "window__assignments",
                queryset=assignments,
                to_attr="campaign_assignments",
            )
        )
        .order_by("window__stay_id", "window__index")
    )
    if show in ("open", "complete"):
        unfinished = Assignment.objects.filter(
            campaign=campaign, window=OuterRef("window"), active=True
        ).exclude(state=AssignmentState.SUBMITTED)
        windows = (
            windows.filter(Exists(unfinished))
            if show == "open"
            else windows.exclude(Exists(unfinished))
        )
    return windows


def campaign_windows_page(
    *,
    admin,
    campaign: Campaign,
    page,
    show: str = "all",
    per_page: int = CAMPAIGN_WINDOWS_PER_PAGE,
) -> Page:
    """One page of ``campaign_windows_with_assignments``."""
    return Paginator(
        campaign_windows_with_assignments(admin=admin, campaign=campaign, show=show),
        per_page,
    ).get_page(page)


def campaign_window_page_number(
    *,
    admin,
    campaign: Campaign,
    window_id: int,
    per_page: int = CAMPAIGN_WINDOWS_PER_PAGE,
) -> int:
    """Which page of all the campaign's windows (``campaign_windows_page``) shows
    the window; 1 for a window not in the campaign."""
    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's assignments.")
    window = Window.objects.filter(pk=window_id).values("stay_id", "index").first()
    if window is None:
        return 1
    before = CampaignWindow.objects.filter(
        Q(window__stay_id__lt=window["stay_id"])
        | Q(window__stay_id=window["stay_id"], window__index__lt=window["index"]),
        campaign=campaign,
    ).count()
    return before // per_page + 1


def campaign_assignment_get(*, admin, campaign: Campaign, assignment_id) -> Assignment:
    """An assignment of the campaign; Http404 for another id or a non-admin."""
    if not user_is_admin(admin):
        raise Http404("No such assignment.")
    assignment = Assignment.objects.filter(pk=assignment_id, campaign=campaign).first()
    if assignment is None:
        raise Http404("No such assignment.")
    return assignment


def campaign_window_get(*, admin, campaign: Campaign, window_id) -> Window:
    """A window of the campaign; Http404 for another id or a non-admin."""
    if not user_is_admin(admin):
        raise Http404("No such window.")
    window = Window.objects.filter(
        pk=window_id, campaign_windows__campaign=campaign
    ).first()
    if window is None:
        raise Http404("No such window in this campaign.")
    return window


def physicians_all() -> QuerySet:
    """Active users with the physician role, by username: the people a campaign
    can assign windows to."""
    return (
        get_user_model()
        .objects.filter(is_active=True, groups__name=Role.PHYSICIAN)
        .distinct()
        .order_by("username")
    )


def gold_window_counts(*, cohort: Cohort | None = None) -> dict[str, int]:
    """How many sampled Gold windows there are, and in how many stays: what a new
    campaign can draw from."""
    return (
        gold_windows_of(cohort=cohort)
        .order_by()
        .aggregate(windows=Count("id"), stays=Count("stay_id", distinct=True))
    )


def cohorts_all() -> QuerySet[Cohort]:
    """The cohorts by name, each with ``gold_windows`` and ``gold_stays``: what a
    campaign over the cohort can draw from."""
    gold = Q(cohort_stays__stay__windows__sampled_gold=True)
    return Cohort.objects.annotate(
        gold_windows=Count("cohort_stays__stay__windows", filter=gold),
        gold_stays=Count("cohort_stays__stay", filter=gold, distinct=True),
    ).order_by("name")


def gold_windows_of(*, cohort: Cohort | None = None) -> QuerySet[Window]:
    """The sampled Gold windows, of the cohort's stays when one is given."""
    windows = Window.objects.filter(sampled_gold=True)
    if cohort is not None:
        windows = windows.filter(stay__cohort_stays__cohort=cohort)
    return windows.order_by("stay_id", "index")
