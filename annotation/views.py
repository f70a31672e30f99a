"""The physician's pages: the queue of assigned windows and the annotation page
(the window's trajectory beside the four task forms), with the endpoints its
script calls to save drafts, submit, reopen and suggest terms. And the admin's
campaign pages: the list with progress, the creation form, and each campaign's
progress with forms to add a rater to a window or reassign an abandoned one."""

from __future__ import annotations

import uuid
from operator import itemgetter

from django.contrib import messages
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import (
    require_GET,
    require_http_methods,
    require_POST,
)

from accounts.access import admin_required, physician_required
from accounts.ids import id_parse
from accounts.web import (
    found_or_404,
    refusal_on_form,
    refusal_shown,
    render_page_or_partial,
    wants_partial,
)
from annotation import selectors, services
from annotation.blindness import window_is_closed
from annotation.forms import CampaignForm
from annotation.models import ActionRating, AssignmentState, PatientStatus
from annotation.selectors import campaign_pages, labelling
from evaluation.labelschema import STATUS_KEYS
from realicu_web.jsonlimits import JsonLimitError, loads_bounded
from windows.actions import action_text_of
from windows.models import Event
from windows.presentation import window_page_context
from windows.vocabulary import event_label

# Service errors a stale tab gets: shown as a conflict, not next to a field.
CONFLICT_CODES = {"version_conflict", "version_missing", "submitted"}
RATING_KEYS = {"best_practice": "4", "acceptable": "5", "potentially_harmful": "6"}
LISTS = (
    ("acute_problems", "Acute problems", "Acute problem", "a"),
    ("added_actions", "Actions that should have been taken", "Action", "d"),
    ("red_flags", "Red flags: avoid now", "Red flag", "f"),
)


@require_GET
@physician_required
def queue(request):
    """The physician's queue: progress counted in the database, and one page of
    assignments, the windows still to label first."""
    context = selectors.queue_page(user=request.user, page=request.GET.get("page"))
    rows = [
        {
            "assignment": assignment,
            "window": assignment.window,
            "stay": assignment.window.stay,
            "end_hours": assignment.window.stay.hours_since_admit(
                assignment.window.end
            ),
        }
        for assignment in context["page"]
    ]
    context["rows"] = rows
    return render_page_or_partial(
        request, "annotation/queue.html", context, partial="queue_table"
    )


def _evidence_labels(window, ids) -> dict[int, str]:
    """A short name for each cited event (the chips), from the window's admission."""
    ids = {pk for pk in ids if isinstance(pk, int)}
    if not ids:
        return {}
    events = Event.objects.filter(
        admission_id=window.stay.admission_id, pk__in=ids
    ).only("pk", "domain", "category", "name", "unit", "time")
    return {e.pk: _event_label(window, e) for e in events}


def _event_label(window, event) -> str:
    """The chip of a cited event: its concept (windows.vocabulary, the name the
    window's event table shows and annotate.js puts on a new chip) and hour."""
    hours = window.stay.hours_since_admit(event.time)
    name = event_label(
        domain=event.domain, category=event.category, name=event.name, unit=event.unit
    ).concept
    return f"{name} · {hours:.1f} h"


def _chips(ids, labels) -> list[dict]:
    return [
        {"id": pk, "label": labels.get(pk, f"Event {pk}")}
        for pk in ids or []
        if isinstance(pk, int)
    ]


def _form_context(page: dict) -> dict:
    """The four task forms filled from the saved label (empty before the first
    save), so a reload shows the draft; ``page`` is the labelling page's data
    (``selectors.labelling_page``)."""
    label = page["label"]
    payload = label.as_payload() if label is not None else {}
    window = page["window"]
    actions = page["critical_actions"]
    ratings = {
        r.get("event_id"): r
        for r in payload.get("action_ratings") or []
        if isinstance(r, dict)
    }
    cited = list(payload.get("status_evidence") or [])
    for field, *_ in LISTS:
        for item in payload.get(field) or []:
            cited += item.get("evidence") or []
    for r in ratings.values():
        cited += r.get("evidence") or []
    labels = _evidence_labels(window, cited)
    lists = [
        {
            "field": field,
            "title": title,
            "noun": noun,
            "key": key,
            "items": [
                {
                    "text": item.get("text", ""),
                    "chips": _chips(item.get("evidence"), labels),
                }
                for item in payload.get(field) or []
            ],
        }
        for field, title, noun, key in LISTS
    ]
    action_rows = []
    for event in actions:
        saved = ratings.get(event.pk, {})
        action_rows.append(
            {
                "event": event,
                "hours": window.stay.hours_since_admit(event.time),
                "text": action_text_of(event),
                "rating": saved.get("rating", ""),
                "chips": _chips(saved.get("evidence"), labels),
            }
        )
    routine = [
        {
            "event": event,
            "hours": window.stay.hours_since_admit(event.time),
            "text": action_text_of(event),
        }
        for event in page["routine_actions"]
    ]
    return {
        "routine_actions": routine,
        "status": payload.get("status", ""),
        "status_choices": [
            (value, name, STATUS_KEYS[value]) for value, name in PatientStatus.choices
        ],
        "status_chips": _chips(payload.get("status_evidence"), labels),
        "lists": lists,
        "actions": action_rows,
        "rating_choices": [
            (value, name, RATING_KEYS[value]) for value, name in ActionRating.choices
        ],
    }


@require_GET
@physician_required
def annotate(request, assignment_id: int):
    partial = wants_partial(request)
    page = selectors.labelling_page(
        user=request.user, assignment_id=assignment_id, full=not partial
    )
    # The annotated window (last index, dosing weight) the trajectory partials read.
    window = page["window"]
    if partial:
        # The embedded event table pages and filters in place.
        context = window_page_context(request, window, full=False)
        return render_page_or_partial(
            request, "windows/window_detail.html", context, partial="event_table"
        )
    assignment, label = page["assignment"], page["label"]
    physician_queue = page["queue"]
    position = next(
        (
            i
            for i, a in enumerate(physician_queue.assignments, start=1)
            if a.pk == assignment.pk
        ),
        None,
    )
    context = window_page_context(request, window, full=True)
    context.update(_form_context(page))
    context.update(
        {
            "assignment": assignment,
            "label": label,
            "version": label.version if label is not None else 0,
            "saved_at": label.updated_at if label is not None else None,
            "readonly": assignment.state == AssignmentState.SUBMITTED,
            "closed": assignment.state == AssignmentState.SUBMITTED
            and window_is_closed(
                campaign_id=assignment.campaign_id, window_id=assignment.window_id
            ),
            # One id per rendering of the page: a double click on Submit, or a
            # retry after a lost response, repeats the same submit.
            "submission_id": uuid.uuid4().hex,
            "queue": physician_queue,
            "position": position,
            "next_assignment": physician_queue.next_after(assignment.pk),
        }
    )
    response = render(request, "annotation/annotate.html", context)
    patch_vary_headers(response, ["HX-Request"])
    # Never show a cached copy: it would hold an old version of the label.
    response["Cache-Control"] = "no-store"
    return response


def _posted_label(request) -> dict:
    """The payload, base version and seconds of work the page's script posts."""
    try:
        payload = loads_bounded(request.POST.get("payload") or "")
    except JsonLimitError as error:
        # Nested thousands deep, an integer beyond 64 bits, a NUL: said, not a 500.
        raise ValidationError(f"The label could not be read: {error}.") from None
    except ValueError:
        raise ValidationError(
            "The label could not be read; reload to continue."
        ) from None
    return {
        "payload": payload,
        "base_version": request.POST.get("base_version"),
        "active_seconds": request.POST.get("active_seconds") or 0,
    }


def _refusal_response(error: ValidationError | PermissionDenied) -> JsonResponse:
    """The labelling page's answer to a refused draft or submit: 403 for a
    label the physician may not change, 409 for a conflict (a stale version),
    else 400 with the answers to fix."""
    if isinstance(error, PermissionDenied):
        return JsonResponse(
            {
                "ok": False,
                "code": "denied",
                "message": str(error) or "You may not change this label.",
                "errors": {},
            },
            status=403,
        )
    if hasattr(error, "error_dict"):
        errors = error.message_dict
        code = "invalid"
    else:
        errors = {NON_FIELD_ERRORS: error.messages}
        code = getattr(error, "code", None) or "invalid"
    conflict = code in CONFLICT_CODES
    message = (
        " ".join(errors[NON_FIELD_ERRORS])
        if conflict
        else "Some answers need fixing (marked below); nothing was lost."
    )
    return JsonResponse(
        {"ok": False, "code": code, "message": message, "errors": errors},
        status=409 if conflict else 400,
    )


@require_POST
@physician_required
def draft(request, assignment_id: int):
    try:
        posted = _posted_label(request)
        label = services.label_save_draft(
            annotator=request.user, assignment_id=assignment_id, **posted
        )
    except (ValidationError, PermissionDenied) as error:
        return _refusal_response(error)
    saved_at = timezone.localtime(label.updated_at)
    return JsonResponse(
        {"ok": True, "version": label.version, "saved_at": f"{saved_at:%H:%M:%S}"}
    )


@require_POST
@physician_required
def submit(request, assignment_id: int):
    try:
        posted = _posted_label(request)
        label = services.label_submit(
            annotator=request.user,
            assignment_id=assignment_id,
            submission_id=request.POST.get("submission_id", ""),
            **posted,
        )
    except (ValidationError, PermissionDenied) as error:
        return _refusal_response(error)
    following = selectors.physician_queue(user=request.user, details=False).next_after(
        label.assignment_id
    )
    url = (
        reverse("annotation:annotate", args=[following.pk])
        if following is not None
        else reverse("annotation:queue")
    )
    if request.htmx:
        response = JsonResponse({"ok": True, "version": label.version, "redirect": url})
        response["HX-Redirect"] = url
        return response
    return redirect(url)


@require_POST
@physician_required
def reopen(request, assignment_id: int):
    with refusal_shown(request):
        services.label_reopen(annotator=request.user, assignment_id=assignment_id)
        messages.success(request, "Reopened: the label is a draft again.")
    return redirect("annotation:annotate", assignment_id)


@require_GET
@physician_required
def suggest(request, assignment_id: int):
    """Terms for a free-text item, as the options of its datalist."""
    assignment = selectors.assignment_get_for_annotator(
        annotator=request.user, assignment_id=assignment_id
    )
    field = request.GET.get("field", "")
    terms = labelling.term_suggestions(
        user=request.user,
        campaign=assignment.campaign,
        field=field,
        prefix=request.GET.get("q", ""),
    )
    response = render(
        request,
        "annotation/partials/_suggestions.html",
        {"terms": terms, "field": field},
    )
    return response


# The admin's campaign pages ----------------------------------------------------


@require_GET
@admin_required
def campaign_list(request):
    page = selectors.campaign_list_page(
        admin=request.user, page=request.GET.get("page")
    )
    return render_page_or_partial(
        request,
        "annotation/campaign_list.html",
        {"page": page, "campaigns": page.object_list},
        partial="campaign_table",
    )


@require_http_methods(["GET", "POST"])
@admin_required
def campaign_new(request):
    form = CampaignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form):
            campaign = services.campaign_create_from_cohort(
                admin=request.user, **form.cleaned_data
            )
            windows = campaign.campaign_windows.count()
            messages.success(
                request,
                f'Campaign "{campaign.name}" created: {windows:,} '
                f"window{'s' if windows != 1 else ''}, "
                f"{campaign.assignments.count():,} assignments.",
            )
            return redirect("annotation:campaign_detail", campaign.pk)
    context = {"form": form, "available": selectors.gold_window_counts()}
    return render(request, "annotation/campaign_new.html", context)


@require_GET
@admin_required
def campaign_detail(request, campaign_id: int):
    """The campaign's progress (counted in the database) and one page of its
    windows, each with forms to add a physician or reassign an assignment."""
    partial = wants_partial(request)
    data = campaign_pages.campaign_page(
        admin=request.user,
        campaign_id=campaign_id,
        page=request.GET.get("page"),
        show=request.GET.get("show", "all"),
        progress=not partial,
    )
    campaign, page, physicians = data["campaign"], data["page"], data["physicians"]
    windows = []
    for campaign_window in page:
        assignments = campaign_window.window.campaign_assignments
        assigned = {a.annotator_id for a in assignments if a.active}
        windows.append(
            {
                "campaign_window": campaign_window,
                "window": campaign_window.window,
                "assignments": assignments,
                # Anyone not actively on the window can be added (a physician it
                # was taken from gets it back with their work).
                "addable": [u for u in physicians if u.pk not in assigned],
                # A window goes only to someone who never had it.
                "takers": [
                    u
                    for u in physicians
                    if u.pk not in {a.annotator_id for a in assignments}
                ],
            }
        )
    context = {
        "campaign": campaign,
        "page": page,
        "windows": windows,
        "show": data["show"],
        "filters": selectors.CAMPAIGN_WINDOW_FILTERS.items(),
    }
    if partial:
        return render_page_or_partial(
            request,
            "annotation/campaign_detail.html",
            context,
            partial="campaign_windows",
        )
    progress = data["progress"]
    totals = progress["totals"]
    context.update(
        {
            "progress": progress,
            "percent": round(100 * totals["submitted"] / totals["total"])
            if totals["total"]
            else 0,
        }
    )
    return render_page_or_partial(
        request, "annotation/campaign_detail.html", context, partial="campaign_windows"
    )


def _campaign_window_url(campaign, window_id: int, page: int) -> str:
    """The campaign page at the page of all windows that shows the window."""
    return (
        reverse("annotation:campaign_detail", args=[campaign.pk])
        + (f"?page={page}" if page > 1 else "")
        + f"#window-{window_id}"
    )


@require_POST
@admin_required
def campaign_assignment_add(request, campaign_id: int):
    window_id = found_or_404(
        id_parse(request.POST.get("window")), "No such window in this campaign."
    )
    target = campaign_pages.assignment_add_page(
        admin=request.user,
        campaign_id=campaign_id,
        window_id=window_id,
        physician_id=id_parse(request.POST.get("physician")),
    )
    campaign, window, physician = itemgetter("campaign", "window", "physician")(target)
    if physician is None:
        messages.error(request, "Choose a physician to add to the window.")
    else:
        with refusal_shown(request):
            services.assignment_add(
                admin=request.user,
                window=window,
                campaign=campaign,
                physician=physician,
            )
            messages.success(request, f"{physician.get_username()} added to {window}.")
    return redirect(_campaign_window_url(campaign, window.pk, target["page_number"]))


@require_POST
@admin_required
def campaign_assignment_reassign(request, campaign_id: int, assignment_id: int):
    target = campaign_pages.assignment_reassign_page(
        admin=request.user,
        campaign_id=campaign_id,
        assignment_id=assignment_id,
        physician_id=id_parse(request.POST.get("physician")),
    )
    campaign, assignment = target["campaign"], target["assignment"]
    physician = target["physician"]
    if physician is None:
        messages.error(request, "Choose the physician to take the window over.")
    else:
        with refusal_shown(request):
            services.assignment_reassign(
                admin=request.user, assignment=assignment, physician=physician
            )
            messages.success(
                request,
                f"{assignment.window} reassigned from "
                f"{assignment.annotator.get_username()} to "
                f"{physician.get_username()}.",
            )
    return redirect(
        _campaign_window_url(campaign, assignment.window_id, target["page_number"])
    )


__all__ = [
    "annotate",
    "campaign_assignment_add",
    "campaign_assignment_reassign",
    "campaign_detail",
    "campaign_list",
    "campaign_new",
    "draft",
    "queue",
    "reopen",
    "submit",
    "suggest",
]
