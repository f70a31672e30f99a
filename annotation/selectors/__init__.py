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
from django.db import connection
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

from accounts.roles import Role, user_is_admin, user_is_physician
from annotation import blindness
from annotation.critical import critical_action_q
from annotation.models import (
    Assignment,
    AssignmentState,
    Campaign,
    CampaignPhysician,
    CampaignWindow,
    Label,
)
from windows.models import Cohort, Event, Window
from windows.selectors_context import window_actions

SUGGESTION_FIELDS = blindness.TEXT_FIELDS


# Queue ------------------------------------------------------------------------


@dataclass
class PhysicianQueue:
    """A physician's active assignments in labelling order, with progress."""

    assignments: list[Assignment]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.assignments)

    @property
    def done(self) -> int:
        return self.counts.get(AssignmentState.SUBMITTED, 0)

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

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
class QueueProgress:
    """A physician's assignment counts by state (active assignments)."""

    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return self.counts.get(AssignmentState.SUBMITTED, 0)

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


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


# The annotation form's data ---------------------------------------------------


def recorded_critical_actions(*, assignment: Assignment) -> QuerySet[Event]:
    """The window's recorded actions that the campaign counts as critical, by
    time: the actions the physician rates. Routine ones are left out."""
    return window_actions(window=assignment.window).filter(
        critical_action_q(assignment.campaign.critical_action_categories)
    )


def recorded_routine_actions(*, assignment: Assignment) -> QuerySet[Event]:
    """The window's recorded actions that the campaign's rules leave out of
    rating (routine: insulin, electrolytes, prophylaxis, ...), by time: the page
    lists them, so a physician sees why an action of the window is not rated."""
    return window_actions(window=assignment.window).exclude(
        critical_action_q(assignment.campaign.critical_action_categories)
    )


def term_suggestions(
    *,
    user,
    campaign: Campaign,
    field: str,
    prefix: str,
    limit: int = 10,
) -> list[tuple[str, int]]:
    """Free-text items already used in ``field`` in the campaign, as
    ``(text, uses)``, most used first, matching ``prefix`` at the start of a word.

    Only texts and their counts over the campaign are returned, never whose or
    on which window. Which labels may be read is blindness's
    (``annotation.blindness.suggestion_labels``): the user's own, others'
    submitted ones, and nothing of anyone who co-rates a window the user still
    has open, in any campaign. Only the campaign's physicians and admins get
    suggestions.
    """
    if field not in SUGGESTION_FIELDS:
        return []
    if not (
        user_is_admin(user)
        or (
            user_is_physician(user)
            and CampaignPhysician.objects.filter(campaign=campaign, user=user).exists()
        )
    ):
        return []
    prefix = (prefix or "").strip().lower()
    if not prefix:
        return []
    limit = max(1, min(int(limit), 50))
    labels = blindness.suggestion_labels(user=user, campaign=campaign)
    if connection.vendor == "postgresql":
        return _suggestions_postgresql(
            labels=labels, field=field, prefix=prefix, limit=limit
        )
    return _suggestions_python(labels=labels, field=field, prefix=prefix, limit=limit)


def _word_prefix_match(text: str, prefix: str) -> bool:
    lowered = text.lower()
    return lowered.startswith(prefix) or f" {prefix}" in lowered


def _suggestions_python(
    *, labels: QuerySet[Label], field: str, prefix: str, limit: int
) -> list[tuple[str, int]]:
    """The portable version (SQLite, the embedded default)."""
    uses: Counter = Counter()
    spellings: dict[str, Counter] = {}
    for payload in labels.values_list("payload", flat=True):
        for item in (payload or {}).get(field) or []:
            text = (item.get("text") or "").strip() if isinstance(item, dict) else ""
            if not text or not _word_prefix_match(text, prefix):
                continue
            key = " ".join(text.lower().split())
            uses[key] += 1
            spellings.setdefault(key, Counter())[text] += 1
    ranked = sorted(uses.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [(spellings[key].most_common(1)[0][0], n) for key, n in ranked]


def _suggestions_postgresql(
    *, labels: QuerySet[Label], field: str, prefix: str, limit: int
) -> list[tuple[str, int]]:
    """Unnests the items in the database: one query whatever the campaign's size.
    Texts are grouped case- and space-insensitively and shown in their most used
    spelling."""
    ids_sql, ids_params = labels.values("id").query.sql_with_params()
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    sql = f"""
        SELECT mode() WITHIN GROUP (ORDER BY t.text) AS text, count(*) AS uses
        FROM annotation_label l
        CROSS JOIN LATERAL (
            SELECT btrim(item->>'text') AS text
            FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(l.payload->%s) = 'array'
                     THEN l.payload->%s ELSE '[]'::jsonb END
            ) AS item
            WHERE jsonb_typeof(item) = 'object'
        ) t
        WHERE l.id IN ({ids_sql})
          AND t.text <> ''
          AND (lower(t.text) LIKE %s OR lower(t.text) LIKE %s)
        GROUP BY regexp_replace(lower(t.text), '\\s+', ' ', 'g')
        ORDER BY uses DESC, 1
        LIMIT %s
    """
    params = [field, field, *ids_params, f"{like}%", f"% {like}%", limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(text, uses) for text, uses in cursor.fetchall()]


# Consensus and adjudication ---------------------------------------------------


def _disputed(campaign: Campaign):
    from annotation.models import ConsensusLabel

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
    from annotation.models import AdjudicationDecision, ConsensusLabel, WindowAgreement

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


def campaign_agreement_backlog(*, admin, campaign: Campaign) -> dict:
    """Complete windows (every active assignment submitted, two at least) whose
    agreement is missing or was computed from other labels than the current
    ones (WindowAgreement.labels names each label's id and version), and how
    many of them have their agreement task waiting in the outbox (the reaper
    sends it once the broker is reachable): ``{"complete", "missing",
    "waiting", "window_ids"}``."""
    from annotation.models import WindowAgreement
    from jobs.models import OutboxMessage

    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's agreement.")
    current: dict[int, set] = {}
    incomplete: set[int] = set()
    for window_id, state, label_id, version in Assignment.objects.filter(
        campaign=campaign, active=True
    ).values_list("window_id", "state", "label__id", "label__version"):
        if state != AssignmentState.SUBMITTED or label_id is None:
            incomplete.add(window_id)
        current.setdefault(window_id, set()).add((label_id, version))
    complete = {
        window_id: labels
        for window_id, labels in current.items()
        if window_id not in incomplete and len(labels) >= 2
    }
    computed = {
        window_id: {(entry.get("label_id"), entry.get("version")) for entry in labels}
        for window_id, labels in WindowAgreement.objects.filter(
            campaign=campaign, window_id__in=list(complete)
        ).values_list("window_id", "labels")
    }
    missing = sorted(
        window_id
        for window_id, labels in complete.items()
        if computed.get(window_id) != labels
    )
    keys = {f"agreement:{campaign.pk}:{window_id}" for window_id in missing}
    waiting = (
        OutboxMessage.objects.filter(key__in=keys).values("key").distinct().count()
        if keys
        else 0
    )
    return {
        "complete": len(complete),
        "missing": len(missing),
        "waiting": waiting,
        "window_ids": missing,
    }


def agreement_recompute_latest(*, admin, campaign: Campaign):
    """The campaign's most recent agreement recompute (a job row), or None."""
    from annotation.models import AgreementRecompute

    if not user_is_admin(admin):
        raise PermissionDenied("Only an admin can see a campaign's recomputes.")
    return (
        AgreementRecompute.objects.filter(campaign=campaign)
        .select_related("created_by")
        .order_by("-created_at", "-pk")
        .first()
    )
