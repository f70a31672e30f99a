"""Writes of data use: credentials (a researcher records theirs, an admin
approves it, or an admin records one approved), attestations for third-party
services (an admin's for a backbone; a researcher's for their endpoint, which
an admin approves), the egress guard's decisions, and the audit log. Every
write is logged (AuditEvent)."""

from __future__ import annotations

import datetime
import re
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import require_admin, user_is_admin, user_is_researcher
from datause.models import (
    Attestation,
    AttestationPurpose,
    AuditEvent,
    AuditKind,
    Credential,
    EgressDecision,
)
from windows.datasources import DataUse, source_as_dict
from windows.models import DataSource, DataUseTerms

MAX_TEXT = 200
MAX_NOTE = 2000
# PhysioNet usernames: letters, digits, and - _ . (as its sign-up allows).
PHYSIONET_USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
HOST = re.compile(
    r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
)


def _name(user) -> str:
    return user.get_username() if user is not None else ""


def audit_record(
    *,
    kind: str,
    actor=None,
    message: str = "",
    release=None,
    file_path: str = "",
    detail: dict | None = None,
) -> AuditEvent:
    """One line of the audit log. ``release`` is a release (its id and name
    are kept, so the line outlives it)."""
    return AuditEvent.objects.create(
        kind=kind,
        actor=actor if actor is not None and actor.pk else None,
        actor_name=_name(actor),
        release_id=release.pk if release is not None else None,
        release_name=release.name if release is not None else "",
        file_path=(file_path or "")[:300],
        message=message,
        detail=detail or {},
    )


# Downloads ------------------------------------------------------------------


def download_record(*, user, release, path: str) -> AuditEvent:
    """A release file served to ``user`` (pages and API)."""
    return audit_record(
        kind=AuditKind.DOWNLOAD,
        actor=user,
        release=release,
        file_path=path,
        message=f"{_name(user)} downloaded {path} of {release.name}.",
    )


def download_refused_record(*, user, release, path: str, reason: str) -> AuditEvent:
    """A release file refused to ``user`` for want of a credential."""
    return audit_record(
        kind=AuditKind.DOWNLOAD_REFUSED,
        actor=user,
        release=release,
        file_path=path,
        message=reason,
    )


# Credentials ----------------------------------------------------------------


def _text(value, what: str, limit: int = MAX_TEXT, *, required: bool = True) -> str:
    value = (value or "").strip() if isinstance(value, str) else ""
    if required and not value:
        raise ValidationError(f"Give {what}.")
    if len(value) > limit:
        raise ValidationError(
            f"{what[0].upper()}{what[1:]}: at most {limit} characters."
        )
    if any(ord(c) < 32 and c not in "\n\r\t" or ord(c) == 127 for c in value):
        raise ValidationError(f"{what[0].upper()}{what[1:]} holds control characters.")
    return value


def _date(value, what: str) -> datetime.date:
    if isinstance(value, datetime.datetime):
        value = value.date()
    if isinstance(value, str):
        try:
            value = datetime.date.fromisoformat(value.strip())
        except ValueError:
            value = None
    if not isinstance(value, datetime.date):
        raise ValidationError(f"Give {what} as a date (YYYY-MM-DD).")
    return value


def _guarded_source(source) -> DataSource:
    if not isinstance(source, DataSource) or source.pk is None:
        raise ValidationError("Choose the data source.")
    if source.terms == DataUseTerms.OPEN:
        raise ValidationError(
            f"{source.name} is open data: it needs no credential or attestation."
        )
    return source


def _recorded_create(
    model,
    *,
    actor,
    admin: bool,
    stamp: str,
    kinds: tuple,
    what: str,
    particulars: str,
    detail,
    **fields,
):
    """Create a credential or an attestation from ``fields``, its ``stamp``
    field set to now, approved as recorded when an admin records it, with its
    audit lines (``detail(row)`` their detail): who recorded it and, when an
    admin did, that it is approved as recorded."""
    recorded_kind, approved_kind = kinds
    now = timezone.now()
    with transaction.atomic():
        row = model.objects.create(
            **fields,
            **{stamp: now},
            approved_by=actor if admin else None,
            approved_at=now if admin else None,
        )
        snapshot = detail(row)
        audit_record(
            kind=recorded_kind,
            actor=actor,
            message=f"{_name(actor)} recorded {what}{particulars}.",
            detail=snapshot,
        )
        if admin:
            audit_record(
                kind=approved_kind,
                actor=actor,
                message=f"{_name(actor)} approved {what} as they recorded it.",
                detail=snapshot,
            )
    return row


def _locked(model, row, noun: str, *related: str):
    """``row`` again, locked for the rest of the transaction."""
    locked = (
        model.objects.select_for_update()
        .select_related(*related)
        .filter(pk=row.pk)
        .first()
    )
    if locked is None:
        raise ValidationError(f"That {noun} no longer exists.")
    return locked


def _approve(row, noun: str, admin) -> None:
    """Approve a locked credential or attestation (approved_by/_at), unless
    it is revoked or approved already."""
    if row.revoked_at is not None:
        raise ValidationError(f"The {noun} was revoked; it cannot be approved.")
    if row.approved_at is not None:
        raise ValidationError(f"The {noun} is already approved.")
    row.approved_by = admin
    row.approved_at = timezone.now()
    row.save(update_fields=["approved_by", "approved_at"])


def _revoke(row, noun: str, actor) -> None:
    """Revoke a locked credential or attestation (revoked_by/_at)."""
    if row.revoked_at is not None:
        raise ValidationError(f"The {noun} is already revoked.")
    row.revoked_by = actor
    row.revoked_at = timezone.now()
    row.save(update_fields=["revoked_by", "revoked_at"])


def credential_record(
    *,
    actor,
    user,
    source: DataSource,
    physionet_username: str,
    agreement_version: str,
    signed_on,
    expires_on,
    note: str = "",
) -> Credential:
    """Record ``user``'s credentialed access to ``source``. Recorded by the
    user themself, it waits for an admin's approval; recorded by an admin,
    it is approved at once. Either way it is logged."""
    if actor is None or not actor.is_authenticated:
        raise PermissionDenied("Sign in to record a credential.")
    admin = user_is_admin(actor)
    if user is None or user.pk is None:
        raise ValidationError("Choose whose credential it is.")
    if user.pk != actor.pk and not admin:
        raise PermissionDenied("Only an admin can record another user's credential.")
    if not admin and not user_is_researcher(actor):
        raise PermissionDenied("Credentials are recorded for researchers' accounts.")
    source = _guarded_source(source)
    username = _text(
        physionet_username,
        "the PhysioNet username",
        100,
        required=source.terms == DataUseTerms.CREDENTIALED,
    )
    if username and not PHYSIONET_USERNAME.fullmatch(username):
        raise ValidationError(
            "A PhysioNet username holds letters, digits, dots, hyphens and "
            "underscores only."
        )
    agreement = _text(agreement_version, "the agreement signed and its version")
    signed = _date(signed_on, "the date the agreement was signed")
    expires = _date(expires_on, "the date the access expires")
    today = timezone.localdate()
    if signed > today:
        raise ValidationError("The agreement cannot be signed in the future.")
    if expires < today:
        raise ValidationError(
            f"The access expired on {expires.isoformat()}: record the renewed one."
        )
    if expires <= signed:
        raise ValidationError("The expiry must come after the date signed.")
    note = _text(note, "the note", MAX_NOTE, required=False)
    return _recorded_create(
        Credential,
        actor=actor,
        admin=admin,
        stamp="recorded_at",
        kinds=(AuditKind.CREDENTIAL_RECORDED, AuditKind.CREDENTIAL_APPROVED),
        what=f"{_name(user)}'s credential for {source.name}",
        particulars=f" (PhysioNet {username or '-'}, {agreement}, signed "
        f"{signed.isoformat()}, expires {expires.isoformat()})",
        detail=_credential_detail,
        user=user,
        source=source,
        physionet_username=username,
        agreement_version=agreement,
        signed_on=signed,
        expires_on=expires,
        note=note,
        recorded_by=actor,
    )


def _credential_detail(credential: Credential) -> dict:
    return {
        "credential_id": credential.pk,
        "user": _name(credential.user),
        "source": credential.source.key,
        "physionet_username": credential.physionet_username,
        "agreement_version": credential.agreement_version,
        "signed_on": credential.signed_on.isoformat(),
        "expires_on": credential.expires_on.isoformat(),
    }


def _credential_audit(credential: Credential, *, kind: str, actor, verb: str) -> None:
    audit_record(
        kind=kind,
        actor=actor,
        message=f"{_name(actor)} {verb} {_name(credential.user)}'s credential "
        f"for {credential.source.name}.",
        detail=_credential_detail(credential),
    )


def credential_approve(*, admin, credential: Credential) -> Credential:
    """An admin approves a credential a researcher recorded."""
    require_admin(admin, "approve a credential")
    with transaction.atomic():
        credential = _locked(Credential, credential, "credential", "user", "source")
        # Revoked or approved already say so first (_approve).
        pending = credential.revoked_at is None and credential.approved_at is None
        if pending and credential.expires_on < timezone.localdate():
            raise ValidationError(
                "The credential has expired; ask for the renewed one."
            )
        _approve(credential, "credential", admin)
        _credential_audit(
            credential, kind=AuditKind.CREDENTIAL_APPROVED, actor=admin, verb="approved"
        )
    return credential


def credential_revoke(*, actor, credential: Credential) -> Credential:
    """An admin revokes a credential, or its holder withdraws it."""
    if not (user_is_admin(actor) or credential.user_id == actor.pk):
        raise PermissionDenied("Only an admin or its holder can revoke a credential.")
    with transaction.atomic():
        credential = _locked(Credential, credential, "credential", "user", "source")
        _revoke(credential, "credential", actor)
        _credential_audit(
            credential, kind=AuditKind.CREDENTIAL_REVOKED, actor=actor, verb="revoked"
        )
    return credential


# Attestations ---------------------------------------------------------------


def host_of(value: str) -> str:
    """The host a URL or a bare host name names, as the address policy
    compares hosts (oracle.backbones.endpoints.url_parse): lower case, no
    trailing dot, an internationalised name in its ASCII form, an IPv6
    address without brackets."""
    value = (value or "").strip()
    if not value or len(value) > 500 or any(c.isspace() for c in value):
        raise ValidationError(
            "Give the service's address: a URL such as https://api.example.com/v1 "
            "or its host name."
        )
    try:
        host = urlsplit(value if "//" in value else f"//{value}").hostname or ""
    except ValueError:
        host = ""
    host = host.rstrip(".").lower()
    if host and not host.isascii():
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            host = ""
    import ipaddress

    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not host or len(host) > 253 or not HOST.fullmatch(host):
        raise ValidationError(f"{value[:100]} does not name a host.")
    return host


def _url(value: str, what: str) -> str:
    value = _text(value, what, 500)
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"Give {what} as an http:// or https:// link.")
    return value


def attestation_record(
    *,
    actor,
    address: str,
    source: DataSource,
    purpose: str,
    service: str,
    zero_retention: bool,
    no_training: bool,
    no_human_review: bool,
    evidence_url: str,
    expires_on=None,
) -> Attestation:
    """Attest that the service at ``address`` may receive ``source``'s data:
    it keeps none of it, trains on none of it and lets no person review it,
    as the evidence shows. A backbone's attestation is an admin's, in force
    at once; an endpoint's is its researcher's, in force once an admin
    approves it (an admin's own is approved as recorded)."""
    if actor is None or not actor.is_authenticated:
        raise PermissionDenied("Sign in to record an attestation.")
    admin = user_is_admin(actor)
    if purpose not in AttestationPurpose.values:
        raise ValidationError("Choose what the attestation is for.")
    if purpose == AttestationPurpose.BACKBONE and not admin:
        raise PermissionDenied(
            "Only an admin can attest a service for the Oracle and the agents."
        )
    if purpose == AttestationPurpose.ENDPOINT and not (
        admin or user_is_researcher(actor)
    ):
        raise PermissionDenied("Only researchers and admins attest endpoints.")
    source = _guarded_source(source)
    host = host_of(address)
    service = _text(service, "the service (its name and plan)")
    if not (zero_retention is True and no_training is True and no_human_review is True):
        raise ValidationError(
            "An attestation confirms all three: zero data retention, no training "
            "on the data, and no human review of it. A service that cannot "
            "promise them may not receive credentialed data; serve a model on "
            "site instead (PhysioNet recommends a locally deployed model)."
        )
    evidence = _url(evidence_url, "the link to the evidence")
    expires = None
    if expires_on not in (None, ""):
        expires = _date(expires_on, "the date the attestation expires")
        if expires < timezone.localdate():
            raise ValidationError("The attestation would already have expired.")
    return _recorded_create(
        Attestation,
        actor=actor,
        admin=admin,
        stamp="attested_at",
        kinds=(AuditKind.ATTESTATION_RECORDED, AuditKind.ATTESTATION_APPROVED),
        what=f"the attestation of {service} at {host} for {source.name}",
        particulars=": zero retention, no training, no human review "
        f"(evidence: {evidence})",
        detail=Attestation.snapshot,
        host=host,
        source=source,
        purpose=purpose,
        service=service,
        zero_retention=True,
        no_training=True,
        no_human_review=True,
        evidence_url=evidence,
        expires_on=expires,
        attested_by=actor,
        attested_by_name=_name(actor),
    )


def _attestation_audit(
    attestation: Attestation, *, kind: str, actor, what: str
) -> None:
    audit_record(
        kind=kind,
        actor=actor,
        message=f"{_name(actor)} {what} of {attestation.service} at "
        f"{attestation.host} for {attestation.source.name}.",
        detail=attestation.snapshot(),
    )


def attestation_approve(*, admin, attestation: Attestation) -> Attestation:
    """An admin approves a researcher's attestation of their endpoint."""
    require_admin(admin, "approve an attestation")
    with transaction.atomic():
        attestation = _locked(Attestation, attestation, "attestation", "source")
        _approve(attestation, "attestation", admin)
        _attestation_audit(
            attestation,
            kind=AuditKind.ATTESTATION_APPROVED,
            actor=admin,
            what=f"approved {attestation.attested_by_name}'s attestation",
        )
    return attestation


def attestation_revoke(*, actor, attestation: Attestation) -> Attestation:
    """An admin revokes an attestation, or who recorded it withdraws it: runs
    to that host of that source's data are refused from then on."""
    if not (user_is_admin(actor) or attestation.attested_by_id == actor.pk):
        raise PermissionDenied(
            "Only an admin or who recorded it can revoke an attestation."
        )
    with transaction.atomic():
        attestation = _locked(Attestation, attestation, "attestation", "source")
        _revoke(attestation, "attestation", actor)
        _attestation_audit(
            attestation,
            kind=AuditKind.ATTESTATION_REVOKED,
            actor=actor,
            what="revoked the attestation",
        )
    return attestation


# The egress guard's record ----------------------------------------------------


def egress_decision_record(
    *,
    actor,
    purpose: str,
    subject: str,
    url: str,
    host: str,
    addresses: list[str],
    on_site: bool | None,
    data_use: DataUse,
    allowed: bool,
    reason: str,
    attestations: list[Attestation],
    ids: dict,
) -> EgressDecision:
    """What the egress guard decided (oracle.egress), kept whatever it was;
    a refusal, and an allowance to a third party, are also audit lines."""
    with transaction.atomic():
        decision = EgressDecision.objects.create(
            actor=actor if actor is not None and actor.pk else None,
            actor_name=_name(actor),
            purpose=purpose,
            subject=subject[:300],
            url=(url or "")[:500],
            host=host[:253],
            addresses=addresses,
            on_site=on_site,
            terms=data_use.terms,
            sources=[source_as_dict(s) for s in data_use.sources],
            allowed=allowed,
            reason=reason,
            attestations_snapshot=[a.snapshot() for a in attestations],
            **ids,
        )
        if attestations:
            decision.attestations.set(attestations)
        if not allowed or on_site is False and data_use.restricted:
            audit_record(
                kind=AuditKind.EGRESS_ALLOWED if allowed else AuditKind.EGRESS_REFUSED,
                actor=actor,
                message=reason,
                detail={"decision_id": decision.pk, **decision.provenance()},
            )
    return decision
