"""Data-use pages, under data-use/: the sources and their terms; one's
credentials and endpoint attestations, recorded here; for admins, every
credential and attestation to approve or revoke, and the audit log."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.access import admin_required, role_required
from accounts.roles import user_is_admin, user_is_researcher
from accounts.web import error_text, found_or_404, refusal_shown
from datause import selectors, services
from datause.models import AttestationPurpose, AuditKind
from windows.models import DataSource

data_use_user_required = role_required(
    lambda user: user_is_admin(user) or user_is_researcher(user),
    message="Data use is for researchers and admins.",
)


class _GuardedSourceForm(forms.Form):
    """A form about one of the data sources that need credentials (read per
    form: reading them first ensures the known sources exist)."""

    source = forms.ModelChoiceField(
        queryset=DataSource.objects.none(), to_field_name="key", label="Data source"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].queryset = selectors.sources_needing_credentials()


class CredentialForm(_GuardedSourceForm):
    field_order = ["username", "source"]

    username = forms.CharField(
        required=False,
        max_length=150,
        label="Account",
        help_text="Admins: whose credential it is (empty: your own).",
    )
    physionet_username = forms.CharField(
        required=False, max_length=100, label="PhysioNet username"
    )
    agreement_version = forms.CharField(
        max_length=200,
        label="Agreement signed, with its version",
        initial="PhysioNet Credentialed Health Data Use Agreement 1.5.0",
    )
    signed_on = forms.DateField(label="Signed on")
    expires_on = forms.DateField(label="Expires on")
    note = forms.CharField(required=False, max_length=2000)


class AttestationForm(_GuardedSourceForm):
    field_order = ["address", "source"]

    address = forms.CharField(
        max_length=500,
        label="Service address",
        help_text="Its URL (https://api.example.com/v1) or host name.",
    )
    purpose = forms.ChoiceField(
        choices=AttestationPurpose.choices, initial=AttestationPurpose.ENDPOINT
    )
    service = forms.CharField(max_length=200, label="Service and plan")
    zero_retention = forms.BooleanField(
        required=False, label="Keeps none of the data (zero data retention)"
    )
    no_training = forms.BooleanField(
        required=False, label="Trains no model on the data"
    )
    no_human_review = forms.BooleanField(
        required=False, label="Lets no person review the data"
    )
    evidence_url = forms.CharField(max_length=500, label="Link to the evidence")
    expires_on = forms.DateField(required=False, label="Expires on (optional)")


def _page(request, *, credential_form=None, attestation_form=None, status=200):
    is_admin = user_is_admin(request.user)
    context = {
        **selectors.data_use_page(user=request.user),
        "is_admin": is_admin,
        "credential_form": credential_form or CredentialForm(),
        "attestation_form": attestation_form
        or AttestationForm(
            initial={
                "purpose": AttestationPurpose.BACKBONE
                if is_admin
                else AttestationPurpose.ENDPOINT
            }
        ),
    }
    return render(request, "datause/data_use.html", context, status=status)


@require_GET
@data_use_user_required
def data_use(request):
    return _page(request)


def _account(request, username: str):
    if not username or username == request.user.get_username():
        return request.user
    if not user_is_admin(request.user):
        raise PermissionDenied("Only an admin can record another user's credential.")
    found = get_user_model().objects.filter(username=username).first()
    if found is None:
        raise ValidationError(f"There is no account {username!r}.")
    return found


def _record(request, form, record, what: str, form_name: str):
    """Record what a valid ``form`` holds with ``record(cleaned_data)``; an
    invalid form or a refused record shows the page again with the reason."""
    if form.is_valid():
        try:
            record(form.cleaned_data)
        except (ValidationError, PermissionDenied) as error:
            form.add_error(None, error_text(error))
        else:
            messages.success(
                request,
                f"{what} recorded"
                + ("." if user_is_admin(request.user) else ": an admin approves it."),
            )
            return redirect("datause:data_use")
    return _page(request, status=400, **{form_name: form})


@require_POST
@data_use_user_required
def credential_record(request):
    def record(data):
        data = dict(data)
        user = _account(request, data.pop("username").strip())
        services.credential_record(actor=request.user, user=user, **data)

    form = CredentialForm(request.POST)
    return _record(request, form, record, "Credential", "credential_form")


@require_POST
@data_use_user_required
def attestation_record(request):
    def record(data):
        if not user_is_admin(request.user):
            data = {**data, "purpose": AttestationPurpose.ENDPOINT}
        services.attestation_record(actor=request.user, **data)

    form = AttestationForm(request.POST)
    return _record(request, form, record, "Attestation", "attestation_form")


def _act(request, action, done: str):
    with refusal_shown(request):
        action()
        messages.success(request, done)
    return redirect("datause:data_use")


def _row_act(request, noun: str, row_id: int, action, who: str, done: str):
    """An approval or a revocation of the credential or attestation (``noun``)
    ``row_id`` names, by the user as ``who`` (admin, actor); Http404 for one
    the user may not see."""
    getter = {
        "credential": selectors.credential_get,
        "attestation": selectors.attestation_get,
    }[noun]
    row = found_or_404(
        getter(user=request.user, **{f"{noun}_id": row_id}), f"No such {noun}."
    )
    return _act(request, lambda: action(**{who: request.user, noun: row}), done)


@require_POST
@data_use_user_required
@admin_required
def credential_approve(request, credential_id: int):
    return _row_act(
        request,
        "credential",
        credential_id,
        services.credential_approve,
        "admin",
        "Credential approved.",
    )


@require_POST
@data_use_user_required
def credential_revoke(request, credential_id: int):
    return _row_act(
        request,
        "credential",
        credential_id,
        services.credential_revoke,
        "actor",
        "Credential revoked.",
    )


@require_POST
@data_use_user_required
@admin_required
def attestation_approve(request, attestation_id: int):
    return _row_act(
        request,
        "attestation",
        attestation_id,
        services.attestation_approve,
        "admin",
        "Attestation approved.",
    )


@require_POST
@data_use_user_required
def attestation_revoke(request, attestation_id: int):
    return _row_act(
        request,
        "attestation",
        attestation_id,
        services.attestation_revoke,
        "actor",
        "Attestation revoked.",
    )


def _id_param(value: str) -> int | None:
    value = (value or "").strip()
    if value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


@require_GET
@admin_required
def audit(request):
    kind = request.GET.get("kind", "")
    if kind not in AuditKind.values:
        kind = ""
    actor = (request.GET.get("actor") or "").strip()[:150]
    release_id = _id_param(request.GET.get("release", ""))
    context = {
        **selectors.audit_page(
            user=request.user,
            kind=kind,
            actor=actor,
            release_id=release_id,
            page=request.GET.get("page"),
        ),
        "kinds": AuditKind.choices,
        "kind": kind,
        "actor": actor,
        "release": release_id or "",
    }
    return render(request, "datause/audit.html", context)
