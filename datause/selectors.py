"""Reads of data use: the terms of what a campaign, cohort, Oracle run,
release or agent run is built from; whether a user may receive a release's
data (their credentials); the attestations that clear a third-party host;
the decision a run started under; the audit log (admins).

Subjects of apps above this one are read by their model's label and their
relations, never imported."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.roles import user_is_admin
from datause.models import (
    Attestation,
    AttestationPurpose,
    AuditEvent,
    Credential,
    EgressDecision,
    EgressPurpose,
)
from windows.datasources import (
    STRICTNESS,
    DataUse,
    data_sources_ensure,
    data_use_of_stays,
    terms_strictest,
)
from windows.models import DataSource, DataUseTerms, Stay

# Terms ----------------------------------------------------------------------


def _label(subject) -> str:
    return subject._meta.label


def stays_of(subject) -> QuerySet[Stay]:
    """The stays whose data ``subject`` holds or sends: a campaign's windows'
    stays, a cohort's stays, an Oracle run's campaign or cohort, a release's
    window records (or, before it has any, its inputs), an agent run's or an
    endpoint's release."""
    label = _label(subject)
    if label == "windows.Stay":
        return Stay.objects.filter(pk=subject.pk)
    if label == "annotation.Campaign":
        return Stay.objects.filter(windows__campaign_windows__campaign_id=subject.pk)
    if label == "windows.Cohort":
        return Stay.objects.filter(cohort_stays__cohort_id=subject.pk)
    if label == "oracle.OracleRun":
        if subject.campaign_id is not None:
            return Stay.objects.filter(
                windows__campaign_windows__campaign_id=subject.campaign_id
            )
        if subject.cohort_id is not None:
            return Stay.objects.filter(cohort_stays__cohort_id=subject.cohort_id)
        # Neither (runs made as rows, not by oracle_run_create): its labels'.
        return Stay.objects.filter(windows__oracle_labels__run_id=subject.pk)
    if label == "exports.Release":
        if subject.pk is not None and subject.window_records.exists():
            return Stay.objects.filter(pk__in=subject.window_records.values("stay_id"))
        if subject.campaign_id is not None:
            return Stay.objects.filter(
                windows__campaign_windows__campaign_id=subject.campaign_id
            )
        if subject.oracle_run_id is not None:
            return stays_of(subject.oracle_run)
        return Stay.objects.filter(cohort_stays__cohort_id=subject.cohort_id)
    if label in ("agents.AgentRun", "agents.OnlineEndpoint"):
        return stays_of(subject.release)
    raise TypeError(f"No data-use terms for a {label}.")


def data_use_from_record(record: dict) -> DataUse | None:
    """The terms a manifest or a provenance recorded (``DataUse.as_dict``),
    with each source as it is now in the catalogue where it still is."""
    if not isinstance(record, dict) or "sources" not in record:
        return None
    keys = [s.get("key") for s in record.get("sources") or [] if isinstance(s, dict)]
    found = {s.key: s for s in DataSource.objects.filter(key__in=keys)}
    sources = []
    for entry in record.get("sources") or []:
        if not isinstance(entry, dict):
            continue
        source = found.get(entry.get("key"))
        if source is None:  # deleted from the catalogue: as recorded
            terms = entry.get("terms")
            source = DataSource(
                key=entry.get("key", ""),
                name=entry.get("name", ""),
                terms=terms if terms in STRICTNESS else DataUseTerms.RESTRICTED,
                agreement=entry.get("agreement", ""),
                citations=entry.get("citations") or [],
            )
        sources.append(source)
    recorded = record.get("terms")
    terms = terms_strictest(
        [s.terms for s in sources] + ([recorded] if recorded in STRICTNESS else [])
    )
    return DataUse(terms=terms, sources=tuple(sources))


def data_use_of(subject) -> DataUse:
    """The data-use terms of ``subject``: a release's as its manifest
    recorded them when it was built (a release is immutable), else those of
    the stays it is built from (windows.datasources)."""
    if _label(subject) == "exports.Release":
        recorded = data_use_from_record((subject.manifest or {}).get("data_use"))
        if recorded is not None:
            return recorded
    if _label(subject) in ("agents.AgentRun", "agents.OnlineEndpoint"):
        return data_use_of(subject.release)
    return data_use_of_stays(stays_of(subject))


# Credentials ----------------------------------------------------------------


def credentials_valid(*, user, day=None) -> QuerySet[Credential]:
    """The user's approved credentials, unexpired and unrevoked on ``day``
    (today)."""
    day = day or timezone.localdate()
    return Credential.objects.filter(
        user=user,
        approved_at__isnull=False,
        revoked_at__isnull=True,
        expires_on__gte=day,
    )


def credential_missing(*, user, data_use: DataUse) -> list[DataSource]:
    """The sources of ``data_use`` that need a credential the user has not
    got (approved, unexpired). Admins need none: they run the site and its
    imports under their own agreement."""
    guarded = data_use.guarded_sources
    if not guarded or user_is_admin(user):
        return []
    held = set(
        credentials_valid(user=user).values_list("source__key", flat=True).distinct()
    )
    return [s for s in guarded if s.key not in held]


def credential_refusal(missing: list[DataSource]) -> str:
    """Why a user may not receive data of the ``missing`` sources, and what
    to do."""
    names = ", ".join(s.name for s in missing)
    terms = {s.get_terms_display().lower() for s in missing}
    return (
        f"This release is built from {' and '.join(sorted(terms))} data ({names}). "
        "Only researchers whose account records approved, unexpired credentialed "
        f"access to {names} may list or download it. Record your PhysioNet "
        "credential (username, the agreement signed and its version, the date, "
        "its expiry) on the Data use page; an admin approves it."
    )


class CredentialRequired(PermissionDenied):
    """A release refused to a user who holds no valid credential for one of
    its sources (a 403 with the reason); ``release`` is the release."""

    def __init__(self, message: str, *, release=None, missing=()) -> None:
        super().__init__(message)
        self.release = release
        self.missing = list(missing)


def release_access_check(*, user, release) -> None:
    """Raise CredentialRequired unless ``user`` may list and download
    ``release``: an open release is everyone's who may use releases; one
    built from credentialed or restricted data only theirs whose account
    records an approved, unexpired credential for each such source."""
    missing = credential_missing(user=user, data_use=data_use_of(release))
    if missing:
        raise CredentialRequired(
            credential_refusal(missing), release=release, missing=missing
        )


def releases_refused(*, user, releases: QuerySet) -> list[int]:
    """The ids of ``releases`` that ``user`` may not list for want of a
    credential: read from each manifest's terms (one small query for all),
    the inputs' for a release without them."""
    if user_is_admin(user):
        return []
    held = set(
        credentials_valid(user=user).values_list("source__key", flat=True).distinct()
    )
    refused = []
    for pk, record in releases.values_list("pk", "manifest__data_use"):
        data_use = data_use_from_record(record)
        if data_use is None:
            data_use = data_use_of(releases.model.objects.get(pk=pk))
        if any(s.key not in held for s in data_use.guarded_sources):
            refused.append(pk)
    return refused


def credential_list(*, user) -> QuerySet[Credential]:
    """Every credential for an admin; one's own for anyone else."""
    qs = Credential.objects.select_related(
        "user", "source", "approved_by", "revoked_by", "recorded_by"
    )
    if not user_is_admin(user):
        qs = qs.filter(user=user)
    return qs.order_by("-recorded_at", "-id")


def credential_get(*, user, credential_id: int) -> Credential | None:
    return credential_list(user=user).filter(pk=credential_id).first()


def sources_needing_credentials() -> QuerySet[DataSource]:
    data_sources_ensure()
    return DataSource.objects.exclude(terms=DataUseTerms.OPEN).order_by("key")


# Attestations ---------------------------------------------------------------


def attestations_active(
    *, host: str, source_keys: list[str], purpose: str, owner=None
) -> QuerySet[Attestation]:
    """The attestations in force for ``host`` and these sources: approved,
    not revoked, not expired; for an endpoint, those its owner recorded."""
    today = timezone.localdate()
    qs = Attestation.objects.select_related("source", "approved_by").filter(
        host=host,
        source__key__in=source_keys,
        purpose=purpose,
        approved_at__isnull=False,
        revoked_at__isnull=True,
    )
    qs = qs.filter(Q(expires_on__isnull=True) | Q(expires_on__gte=today))
    if purpose == AttestationPurpose.ENDPOINT:
        qs = qs.filter(attested_by=owner) if owner is not None else qs.none()
    return qs.order_by("-approved_at", "-id")


def attestation_list(*, user) -> QuerySet[Attestation]:
    """Every attestation for an admin; one's own for anyone else."""
    qs = Attestation.objects.select_related(
        "source", "attested_by", "approved_by", "revoked_by"
    )
    if not user_is_admin(user):
        qs = qs.filter(attested_by=user)
    return qs.order_by("-attested_at", "-id")


def attestation_get(*, user, attestation_id: int) -> Attestation | None:
    return attestation_list(user=user).filter(pk=attestation_id).first()


# Decisions and the audit log ------------------------------------------------


def egress_decision_for_run(run) -> EgressDecision | None:
    """The egress guard's decision a run started under: the last allowed
    decision for its purpose, data, backbone or endpoint and starter, taken
    no later than the run was created (the guard decides before the run's
    row is written, so no later decision is another run's)."""
    label = _label(run)
    qs = EgressDecision.objects.filter(
        allowed=True, actor_id=run.created_by_id, created_at__lte=run.created_at
    )
    if label == "oracle.OracleRun":
        qs = qs.filter(
            purpose=EgressPurpose.ORACLE_RUN,
            backbone_id=run.backbone_id,
            campaign_id=run.campaign_id,
            cohort_id=run.cohort_id,
        )
    elif label == "agents.AgentRun":
        if run.endpoint_id:
            qs = qs.filter(
                purpose=EgressPurpose.ONLINE_EVAL,
                endpoint_id=run.endpoint_id,
                release_id=run.release_id,
            )
        else:
            qs = qs.filter(
                purpose=EgressPurpose.AGENT_RUN,
                backbone_id=run.backbone_id,
                release_id=run.release_id,
            )
    else:
        return None
    return qs.prefetch_related("attestations").order_by("-created_at", "-id").first()


AUDIT_PAGE = 100


def audit_list(
    *, user, kind: str = "", actor: str = "", release_id: int | None = None
) -> QuerySet[AuditEvent]:
    """The audit log, newest first, for admins only; filtered by kind, by
    the actor's username and by release."""
    if not user_is_admin(user):
        return AuditEvent.objects.none()
    qs = AuditEvent.objects.all()
    if kind:
        qs = qs.filter(kind=kind)
    if actor:
        qs = qs.filter(actor_name=actor)
    if release_id is not None:
        qs = qs.filter(release_id=release_id)
    return qs.order_by("-at", "-id")


def egress_decision_list(*, user) -> QuerySet[EgressDecision]:
    if not user_is_admin(user):
        return EgressDecision.objects.none()
    return EgressDecision.objects.prefetch_related("attestations").order_by(
        "-created_at", "-id"
    )


def audit_page(
    *, user, kind: str = "", actor: str = "", release_id=None, page=None
) -> dict:
    """What the audit page shows: a page of the log so filtered, and the
    egress guard's last 50 decisions."""
    events = audit_list(user=user, kind=kind, actor=actor, release_id=release_id)
    return {
        "page": Paginator(events, AUDIT_PAGE).get_page(page),
        "decisions": egress_decision_list(user=user)[:50],
    }


# What the data-use page lists of a user's own, or of everyone's for an admin.
DATA_USE_PAGE_ROWS = 200


def data_use_page(*, user) -> dict:
    """What the data-use page shows ``user``: the sources and their terms,
    the credentials and attestations they may see, those waiting for an
    admin, and the sources their valid credentials cover."""
    credentials = list(credential_list(user=user)[:DATA_USE_PAGE_ROWS])
    attestations = list(attestation_list(user=user)[:DATA_USE_PAGE_ROWS])
    return {
        "sources": DataSource.objects.order_by("key"),
        "credentials": credentials,
        "attestations": attestations,
        "valid_sources": set(
            credentials_valid(user=user).values_list("source__key", flat=True)
        ),
        "pending_credentials": [c for c in credentials if c.state == "requested"],
        "pending_attestations": [a for a in attestations if a.state == "requested"],
    }
