"""The egress guard (issue 34): where a run may send the contexts of
credentialed or restricted data.

Each backbone and online endpoint is classed by the addresses its host
resolves to, through the address policy's own resolver
(oracle.backbones.endpoints): **on site** when every address is loopback, a
private network or this machine; a **third party** otherwise (a public
address, or a name that resolves to nothing, which cannot be shown to be on
site). Open data (the CLIF demo) goes anywhere the address policy allows.
Credentialed data (MIMIC-IV, MIMIC-IV-Note) and a site's restricted data go
to a third party only when, for that host and every such source of the data,
an attestation is in force (datause.Attestation: zero retention, no training,
no human review, who, when, the evidence): an admin's for a backbone; for a
researcher's endpoint, the researcher's own, approved by an admin.
Otherwise the run is refused as it starts, with the reason.

Every decision is kept (datause.EgressDecision) and a run's provenance is the
decision it started under; a refusal, and an allowance to a third party, are
lines of the audit log."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from datause.models import AttestationPurpose, EgressDecision, EgressPurpose
from datause.selectors import (
    attestations_active,
    credential_missing,
    credential_refusal,
    data_use_of,
)
from datause.services import egress_decision_record
from oracle.backbones import endpoints


@dataclass(frozen=True)
class Placement:
    """Where a URL's host is: on site or a third party, by its addresses."""

    host: str
    addresses: tuple[str, ...]
    on_site: bool | None  # None: not classed (open data)


def _address_on_site(address) -> bool:
    address = endpoints._canonical(address)
    if address.is_loopback or endpoints._is_local(address):
        return True
    if address.version == 6 and address.is_site_local:
        return True
    # is_private: 10/8, 172.16/12, 192.168/16, fc00::/7 and the other
    # non-routed blocks; the shared address space 100.64/10 is neither private
    # nor global, and counts as a third party.
    return address.is_private


def placement(url: str) -> Placement:
    """Whether ``url``'s host is on site or a third party, by every address
    it resolves to now (one public address makes it a third party). An
    unreadable URL raises endpoints.EndpointRefused."""
    _, host, _ = endpoints.url_parse(url)
    literal = endpoints.host_literal(host)
    found = [literal] if literal is not None else endpoints.resolve(host)
    addresses = list(dict.fromkeys(endpoints._canonical(a) for a in found))
    on_site = bool(addresses) and all(_address_on_site(a) for a in addresses)
    return Placement(
        host=host, addresses=tuple(str(a) for a in addresses), on_site=on_site
    )


def _label(obj) -> str:
    return obj._meta.label if obj is not None else ""


def _ids(data, backbone, endpoint) -> dict:
    label = _label(data)
    return {
        "campaign_id": data.pk if label == "annotation.Campaign" else None,
        "cohort_id": data.pk if label == "windows.Cohort" else None,
        "release_id": data.pk if label == "exports.Release" else None,
        "backbone_id": backbone.pk if backbone is not None else None,
        "endpoint_id": endpoint.pk if endpoint is not None else None,
    }


def _subject(purpose: str, data, backbone, url: str) -> str:
    what = EgressPurpose(purpose).label
    where = backbone.name if backbone is not None else url
    return f"{what} over {data} to {where}"


def egress_guard(
    *,
    actor,
    purpose: str,
    data,
    backbone=None,
    url: str = "",
    endpoint=None,
    owner=None,
) -> EgressDecision:
    """Decide, record and enforce whether the contexts of ``data`` (a
    campaign, a cohort or a release) may go to ``backbone`` (an Oracle or a
    reference agent's) or to the online endpoint at ``url`` (``endpoint``
    once registered; ``owner`` its researcher, by default ``actor``).
    Returns the decision when allowed; raises ValidationError with the
    reason, after recording it, when refused. Runs before the caller's
    transaction, so that a refusal stays in the log."""
    if backbone is not None:
        url = backbone.base_url if backbone.kind == "openai" else ""
        attest_purpose = AttestationPurpose.BACKBONE
    else:
        attest_purpose = AttestationPurpose.ENDPOINT
        owner = owner or actor
    data_use = data_use_of(data)
    if not url:  # the rules backbone, or an agent without a model: nothing leaves
        where = Placement(host="", addresses=(), on_site=True)
    elif data_use.restricted:
        where = placement(url)
    else:
        # Open data goes wherever the address policy lets it: its host is not
        # classed (no lookup beyond the policy's own).
        where = Placement(host=endpoints.url_parse(url)[1], addresses=(), on_site=None)
    attestations = []
    allowed, reason = True, ""
    subject = _subject(purpose, data, backbone, url)
    guarded = data_use.guarded_sources
    # A researcher's endpoint gets only what its researcher may receive.
    unheld = (
        credential_missing(user=owner, data_use=data_use)
        if attest_purpose == AttestationPurpose.ENDPOINT and url
        else []
    )
    if unheld:
        allowed = False
        reason = f"{subject} refused: {credential_refusal(unheld)}"
    elif guarded and not where.on_site:
        found = {
            a.source.key: a
            for a in attestations_active(
                host=where.host,
                source_keys=[s.key for s in guarded],
                purpose=attest_purpose,
                owner=owner,
            )
        }
        missing = [s for s in guarded if s.key not in found]
        attestations = [found[s.key] for s in guarded if s.key in found]
        addresses = ", ".join(where.addresses) or "no address"
        names = ", ".join(s.name for s in guarded)
        if missing:
            allowed = False
            lacking = ", ".join(s.name for s in missing)
            who = (
                "an admin records"
                if attest_purpose == AttestationPurpose.BACKBONE
                else "you record, and an admin approves,"
            )
            reason = (
                f"{subject} refused: {where.host} is a third party (it resolves "
                f"to {addresses}, not loopback or a private network), and the "
                f"data is {data_use.terms_label.lower()} ({names}). Its "
                "contexts go to a third-party service only after "
                f"{who} an attestation for {where.host} and {lacking}: the "
                "service, zero data retention, no training, no human review and "
                "a link to the evidence (Data use page). Or serve the model on "
                "site (loopback or a private network), as PhysioNet recommends."
            )
        else:
            reason = (
                f"{subject} allowed: {where.host} is a third party ({addresses}) "
                f"attested for {names} ("
                + "; ".join(
                    f"{a.service}, attested by {a.attested_by_name} "
                    f"{a.attested_at:%Y-%m-%d}"
                    for a in attestations
                )
                + ")."
            )
    elif guarded:
        reason = (
            f"{subject} allowed: {where.host or 'no network'} is on site "
            f"({', '.join(where.addresses) or 'no request leaves the platform'})."
        )
    else:
        reason = f"{subject} allowed: the data is open."
    decision = egress_decision_record(
        actor=actor,
        purpose=purpose,
        subject=subject,
        url=url,
        host=where.host,
        addresses=list(where.addresses),
        on_site=where.on_site,
        data_use=data_use,
        allowed=allowed,
        reason=reason,
        attestations=attestations,
        ids=_ids(data, backbone, endpoint),
    )
    if not allowed:
        raise ValidationError(reason)
    return decision
