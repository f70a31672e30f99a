"""Release pages for researchers and admins: the releases with their build
progress, a release's files and your submissions, a submission's scores, the
leaderboard, your API token, and the API's documentation page."""

from __future__ import annotations

import math
from pathlib import Path

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import FileResponse, Http404, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.access import admin_required
from accounts.ids import IdChoiceField
from accounts.roles import user_is_admin
from accounts.web import found_or_404, render_page_or_partial
from annotation.models import Campaign
from evaluation.metrics import DEFAULT_K
from exports import selectors, services, services_pages
from exports.building import ReleaseFileChanged
from exports.downloads import release_file_serve
from exports.models import ApiToken, ReleaseKind, SubmissionState
from exports.roles import release_user_required
from exports.scoring import MAX_K
from exports.submission_files import submission_plot_source
from exports.throttling import rate_limit_hit, scope_rate
from exports.tokens import token_expires_at
from jobs.reaper import job_check
from oracle.models import OracleRun, ValidationReport
from oracle.promotion_gate import promotion_gate
from windows.models import Cohort

PLOT_NAMES = ("by_disease_group", "by_hours_since_admit")


class ReleaseBuildForm(forms.Form):
    kind = forms.ChoiceField(choices=ReleaseKind.choices)
    campaign = IdChoiceField(
        queryset=Campaign.objects.all(), required=False, help_text="For RealICU-Gold."
    )
    oracle_run = IdChoiceField(
        queryset=OracleRun.objects.all(), required=False, help_text="For RealICU-Scale."
    )
    cohort = IdChoiceField(
        queryset=Cohort.objects.all(), required=False, help_text="For surveillance."
    )
    notes = forms.CharField(required=False, max_length=2000)


class SubmissionForm(forms.Form):
    file = forms.FileField(help_text="JSONL: one prediction per line.")
    model_name = forms.CharField(max_length=100)
    k = forms.IntegerField(min_value=1, max_value=MAX_K, initial=DEFAULT_K)
    public = forms.BooleanField(required=False, help_text="Show on the leaderboard.")


def _release_list_page(
    request, form: ReleaseBuildForm | None = None, status: int = 200
):
    context = {
        **selectors.release_list_page(user=request.user),
        "is_admin": user_is_admin(request.user),
        "form": form or ReleaseBuildForm(),
    }
    return render_page_or_partial(
        request,
        "exports/release_list.html",
        context,
        partial="release_table",
        status=status,
    )


@require_GET
@release_user_required
def release_list(request):
    return _release_list_page(request)


@require_POST
@release_user_required
@admin_required
def release_build_start(request):
    form = ReleaseBuildForm(request.POST)
    if form.is_valid():
        try:
            release, warning = services_pages.release_build_request(
                user=request.user,
                kind=form.cleaned_data["kind"],
                campaign=form.cleaned_data["campaign"],
                oracle_run=form.cleaned_data["oracle_run"],
                cohort=form.cleaned_data["cohort"],
                notes=form.cleaned_data["notes"],
            )
        except ValidationError as error:
            for message in error.messages:
                form.add_error(None, message)
        else:
            messages.success(request, f"{release} is queued for building.")
            if warning:
                messages.warning(request, warning)
            return redirect("exports:release_list")
    return _release_list_page(request, form, status=400)


class PromoteForm(forms.Form):
    """Promote an Oracle run to RealICU-Scale with one of its validation
    reports; the service checks that the report is the run's."""

    oracle_run = IdChoiceField(queryset=OracleRun.objects.all())
    validation_report = IdChoiceField(
        queryset=ValidationReport.objects.all(), required=False
    )
    notes = forms.CharField(required=False, max_length=2000)
    override_reason = forms.CharField(required=False, max_length=2000)


def _query_id(request, name: str) -> int | None:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise Http404(f"No such {name.replace('_', ' ')}: that is not an id.")
    return int(raw)


def _release_new_page(
    request, run_id=None, report_id=None, form=None, errors=(), status=200
):
    page = selectors.release_new_page(
        user=request.user, run_id=run_id, report_id=report_id, strict=form is None
    )
    report = page.get("report")
    context = {
        **page,
        "gate": promotion_gate(report=report) if report is not None else None,
        "form": form,
        "errors": list(errors),
    }
    return render(request, "exports/release_new.html", context, status=status)


@require_http_methods(["GET", "POST"])
@release_user_required
@admin_required
def release_new(request):
    """Promote an Oracle run to a Scale release (spec section 7): the page
    shows the validation report the release will carry next to the button,
    each figure against its promotion threshold; a run without a report is
    refused, and one below a threshold needs an override with a reason."""
    if request.method == "GET":
        run_id = _query_id(request, "run")
        if run_id is None:
            return _release_new_page(request)
        return _release_new_page(request, run_id, _query_id(request, "report"))
    form = PromoteForm(request.POST)
    if not form.is_valid():
        return _release_new_page(
            request, form=form, errors=_form_errors(form), status=400
        )
    run = form.cleaned_data["oracle_run"]
    report = form.cleaned_data["validation_report"]
    try:
        release = services.release_create(
            user=request.user,
            kind=ReleaseKind.SCALE,
            oracle_run=run,
            validation_report=report,
            notes=form.cleaned_data["notes"],
            override_reason=form.cleaned_data["override_reason"],
        )
    except ValidationError as error:
        return _release_new_page(
            request,
            run.pk,
            report.pk if report else None,
            form=form,
            errors=error.messages,
            status=400,
        )
    messages.success(
        request, f"{release} is queued for building from Oracle run {run.pk}."
    )
    return redirect("exports:release_list")


def _form_errors(form) -> list[str]:
    return [
        f"{form.fields[name].label or name}: {message}"
        if name != "__all__"
        else message
        for name, messages_ in form.errors.items()
        for message in messages_
    ]


def _release_or_404(request, release_id: int):
    return found_or_404(
        selectors.release_get(user=request.user, release_id=release_id),
        "No such release.",
    )


@require_GET
@release_user_required
def release_progress(request, release_id: int):
    release = _release_or_404(request, release_id)
    job_check(release)
    return render(
        request, "exports/release_list.html#release_row", {"release": release}
    )


def _release_detail_page(request, detail, form=None, errors=(), status=200):
    context = {
        **detail.page(),
        "form": form or SubmissionForm(initial={"k": DEFAULT_K}),
        "errors": list(errors),
    }
    return render_page_or_partial(
        request,
        "exports/release_detail.html",
        context,
        partial="release_status",
        status=status,
    )


@require_GET
@release_user_required
def release_detail(request, release_id: int):
    return _release_detail_page(
        request,
        selectors.release_detail_get(user=request.user, release_id=release_id),
    )


# An admin's Retry, Rebuild or Cancel of a release (exports/urls.py names one
# a URL): its service, and what the page says when it is done.
RELEASE_ACTIONS = {
    "retry": (services.release_retry, "{release} is queued again."),
    "rebuild": (
        services.release_rebuild,
        "{release} is queued for building: a new version from the same inputs.",
    ),
    "cancel": (services.release_cancel, "{release} is cancelled."),
}


@require_POST
@release_user_required
@admin_required
def release_action(request, release_id: int, action: str):
    """One of RELEASE_ACTIONS on a release; a refusal is shown on the page."""
    service, done = RELEASE_ACTIONS[action]
    release = _release_or_404(request, release_id)
    try:
        result = service(user=request.user, release=release)
    except (ValidationError, PermissionDenied) as error:
        for message in getattr(error, "messages", None) or [str(error)]:
            messages.error(request, message)
        return redirect("exports:release_detail", release_id=release.pk)
    messages.success(request, done.format(release=result))
    return redirect("exports:release_detail", release_id=result.pk)


@require_GET
@release_user_required
def release_file(request, release_id: int, file_path: str):
    try:
        response = release_file_serve(
            request, release_id=release_id, file_path=file_path
        )
    except ReleaseFileChanged as error:
        return render(
            request,
            "exports/release_file_changed.html",
            {"release": error.release, "message": str(error)},
            status=409,
        )
    return found_or_404(response, "No such file in this release.")


@require_POST
@release_user_required
def submission_upload(request, release_id: int):
    detail = selectors.release_detail_get(user=request.user, release_id=release_id)
    # The API's submission rate, counted together with the API's uploads: both
    # start the same scoring jobs.
    rate = scope_rate("submissions")
    wait = rate and rate_limit_hit(
        scope="submissions", ident=f"user{request.user.pk}", rate=rate
    )
    if wait:
        minutes = max(1, math.ceil(wait / 60))
        return _release_detail_page(
            request,
            detail,
            errors=[
                f"Too many uploads of predictions (the limit is {rate}, with the "
                f"API's). Try again in {minutes} minute{'s' if minutes > 1 else ''}."
            ],
            status=429,
        )
    form = SubmissionForm(request.POST, request.FILES)
    prediction = (
        {
            "upload": form.cleaned_data["file"],
            "model_name": form.cleaned_data["model_name"],
            "k": form.cleaned_data["k"],
            "public": form.cleaned_data["public"],
        }
        if form.is_valid()
        else None
    )
    try:
        submission = services_pages.submission_upload(
            user=request.user, release=detail.release, prediction=prediction
        )
    except services_pages.ReleaseNotReady as error:
        return _release_detail_page(request, detail, errors=error.messages, status=409)
    except ValidationError as error:
        return _release_detail_page(
            request, detail, form=form, errors=error.messages, status=400
        )
    if submission is None:
        return _release_detail_page(request, detail, form=form, status=400)
    messages.success(request, "Predictions accepted; scoring has started.")
    return redirect("exports:submission_detail", submission_id=submission.pk)


def _submission_or_404(request, submission_id: int):
    return found_or_404(
        selectors.submission_get(user=request.user, submission_id=submission_id),
        "No such submission.",
    )


@require_GET
@release_user_required
def submission_detail(request, submission_id: int):
    context = found_or_404(
        selectors.submission_page(user=request.user, submission_id=submission_id),
        "No such submission.",
    )
    return render_page_or_partial(
        request, "exports/submission_detail.html", context, partial="scores"
    )


@require_GET
@release_user_required
def submission_plot(request, submission_id: int, name: str):
    submission = _submission_or_404(request, submission_id)
    if name not in PLOT_NAMES or submission.state != SubmissionState.SCORED:
        raise Http404("No such plot.")
    source = found_or_404(submission_plot_source(submission, name), "No such plot.")
    if isinstance(source, Path):
        return FileResponse(open(source, "rb"), content_type="image/png")
    return StreamingHttpResponse(source.chunks(), content_type="image/png")


@require_POST
@release_user_required
def submission_publish(request, submission_id: int):
    submission = _submission_or_404(request, submission_id)
    try:
        services.submission_publish(
            user=request.user,
            submission=submission,
            public=request.POST.get("public") == "1",
        )
    except PermissionDenied as error:
        messages.error(request, str(error))
    return redirect("exports:submission_detail", submission_id=submission.pk)


@require_GET
@release_user_required
def leaderboard(request, release_id: int):
    release = _release_or_404(request, release_id)
    context = selectors.leaderboard_page(user=request.user, release=release)
    if release.kind == ReleaseKind.SURVEILLANCE:
        return render(request, "surveillance/leaderboard.html", context)
    return render(request, "exports/leaderboard.html", context)


def _token_page(request, *, new_key: str | None = None):
    token = ApiToken.objects.filter(user=request.user).first()
    expires_at = token_expires_at(token) if token else None
    response = render(
        request,
        "exports/token.html",
        {
            "token": token,
            "new_key": new_key,
            "expires_at": expires_at,
            "expired": expires_at is not None and expires_at <= timezone.now(),
        },
    )
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@release_user_required
def token_page(request):
    return _token_page(request)


@require_POST
@release_user_required
def token_create(request):
    """The new key is shown in this response only: it is kept nowhere (not
    in the session either), so it cannot be shown again; reloading the page
    would make another token."""
    issued = services.token_create(user=request.user)
    return _token_page(request, new_key=issued.key)


@require_POST
@release_user_required
def token_revoke(request):
    if services.token_revoke(user=request.user):
        messages.success(request, "Your API token is revoked.")
    return redirect("exports:token")
