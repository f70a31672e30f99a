"""The egress guard (issue 34, item 2): a backbone or an endpoint is on site
or a third party by the addresses its host resolves to (the address policy's
own resolver, played here by the test); MIMIC-IV contexts go to a third party
only after an attestation for that host and source, else the run is refused
as it starts, with the reason, and the refusal is logged."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from agents import services as agents
from agents.models import AgentRun, OnlineEndpoint
from datause import services
from datause.models import (
    Attestation,
    AttestationPurpose,
    AuditEvent,
    AuditKind,
    EgressDecision,
)
from oracle import services as oracle
from oracle.egress import placement
from oracle.models import Backbone, BackboneKind, OracleRun
from tests.agents.helpers import run_queued
from tests.datause.conftest import (
    PRIVATE_ADDRESS,
    PUBLIC_ADDRESS,
    PUBLIC_HOST,
    clif_cohort,
    days,
    mimic_cohort,
)
from windows.datasources import MIMIC_IV, data_source_get

pytestmark = pytest.mark.django_db


def _run(admin, name: str, backbone, cohort):
    """An Oracle run created (not queued): where the egress guard decides."""
    return oracle.oracle_run_create(
        admin=admin, name=name, backbone=backbone, cohort=cohort, enqueue=False
    )


def _attest(actor, host=PUBLIC_HOST, *, purpose=AttestationPurpose.BACKBONE):
    return services.attestation_record(
        actor=actor,
        address=f"https://{host}/v1",
        source=data_source_get(MIMIC_IV),
        purpose=purpose,
        service="Example LLM, enterprise plan with zero data retention",
        zero_retention=True,
        no_training=True,
        no_human_review=True,
        evidence_url="https://example.com/contract.pdf",
    )


# Where an endpoint is ---------------------------------------------------------


def test_a_name_resolving_to_a_private_address_is_on_site(dns):
    where = placement("https://llm.internal/v1")
    assert where.on_site and where.addresses == (PRIVATE_ADDRESS,)
    assert placement("http://127.0.0.1:8080/v1").on_site
    assert placement("http://[fd00::5]:8080/v1").on_site
    assert placement("http://192.168.1.20/v1").on_site


def test_a_name_resolving_to_a_public_address_is_a_third_party(dns):
    where = placement(f"https://{PUBLIC_HOST}/v1")
    assert not where.on_site and where.addresses == (PUBLIC_ADDRESS,)
    assert not placement("https://8.8.8.8/v1").on_site
    # One public answer among private ones: a third party.
    dns.answer("mixed.example", ["10.0.0.1", PUBLIC_ADDRESS])
    assert not placement("https://mixed.example/v1").on_site
    # A name that resolves to nothing cannot be shown to be on site.
    assert not placement("https://nowhere.example/v1").on_site
    # The shared address space (carrier NAT) is not a private network.
    assert not placement("http://100.64.1.1/v1").on_site


# The Oracle ---------------------------------------------------------------------


def test_an_oracle_run_of_mimic_data_on_a_public_backbone_is_refused_then_allowed(
    dns, admin_user, public_backbone, client
):
    cohort = mimic_cohort()
    with pytest.raises(ValidationError) as refused:
        _run(admin_user, "cloud", public_backbone, cohort)
    reason = " ".join(refused.value.messages)
    assert "third party" in reason and PUBLIC_HOST in reason
    assert "MIMIC-IV" in reason and "attestation" in reason
    assert not OracleRun.objects.exists()
    decision = EgressDecision.objects.get()
    assert not decision.allowed and not decision.on_site
    assert decision.terms == "credentialed" and decision.cohort_id == cohort.pk
    assert AuditEvent.objects.filter(kind=AuditKind.EGRESS_REFUSED).count() == 1

    attestation = _attest(admin_user)
    run = _run(admin_user, "cloud", public_backbone, cohort)
    allowed = EgressDecision.objects.filter(allowed=True).get()
    assert list(allowed.attestations.all()) == [attestation]
    assert allowed.attestations_snapshot[0]["zero_retention"] is True
    kinds = list(AuditEvent.objects.values_list("kind", flat=True).order_by("at", "id"))
    assert kinds == [
        AuditKind.EGRESS_REFUSED,
        AuditKind.ATTESTATION_RECORDED,
        AuditKind.ATTESTATION_APPROVED,
        AuditKind.EGRESS_ALLOWED,
    ]

    # The run page shows where its contexts go and the attestation.
    client.force_login(admin_user)
    page = client.get(reverse("oracle:run_detail", args=[run.pk])).content.decode()
    assert "a third party" in page
    assert "Example LLM, enterprise plan with zero data retention" in page
    assert "https://example.com/contract.pdf" in page


def test_a_revoked_attestation_refuses_the_next_run(dns, admin_user, public_backbone):
    cohort = mimic_cohort()
    attestation = _attest(admin_user)
    _run(admin_user, "a", public_backbone, cohort)
    services.attestation_revoke(actor=admin_user, attestation=attestation)
    with pytest.raises(ValidationError):
        _run(admin_user, "b", public_backbone, cohort)
    assert OracleRun.objects.count() == 1


def test_a_revoked_attestation_stops_a_resume_and_a_retry(
    dns, admin_user, public_backbone
):
    """Windows sent anew (resume, retry) are a new egress: the guard is asked
    again, and an attestation revoked since the run started stops them."""
    cohort = mimic_cohort()
    attestation = _attest(admin_user)
    run = _run(admin_user, "a", public_backbone, cohort)
    oracle.oracle_run_cancel(admin=admin_user, run=run)
    services.attestation_revoke(actor=admin_user, attestation=attestation)
    state = OracleRun.objects.get(pk=run.pk).state
    for again in (oracle.oracle_run_resume, oracle.oracle_run_retry_failed):
        with pytest.raises(ValidationError) as refused:
            again(admin=admin_user, run=run, enqueue=False)
        assert "attestation" in " ".join(refused.value.messages)
        assert OracleRun.objects.get(pk=run.pk).state == state
    assert (
        EgressDecision.objects.filter(allowed=False, cohort_id=cohort.pk).count() == 2
    )


def test_a_revoked_attestation_stops_an_agent_runs_resume(
    dns, admin_user, mimic_release, public_backbone
):
    attestation = _attest(admin_user)
    run = run_queued(user=admin_user, release=mimic_release, backbone=public_backbone)
    agents.agent_run_cancel(user=admin_user, run=run)
    services.attestation_revoke(actor=admin_user, attestation=attestation)
    with pytest.raises(ValidationError) as refused:
        agents.agent_run_resume(user=admin_user, run=run)
    assert "third party" in " ".join(refused.value.messages)
    run.refresh_from_db()
    assert run.state == "cancelled"


def test_an_on_site_backbone_needs_no_attestation(dns, admin_user, private_backbone):
    run = _run(admin_user, "local", private_backbone, mimic_cohort())
    decision = EgressDecision.objects.get()
    assert decision.allowed and decision.on_site
    assert decision.addresses == [PRIVATE_ADDRESS]
    assert run.pk
    assert not AuditEvent.objects.filter(kind=AuditKind.EGRESS_REFUSED).exists()


def test_the_rules_backbone_sends_nothing_anywhere(admin_user):
    rules, _ = Backbone.objects.get_or_create(
        name="rules", defaults={"kind": BackboneKind.RULES}
    )
    _run(admin_user, "rules", rules, mimic_cohort())
    assert EgressDecision.objects.get().on_site


def test_open_data_may_go_to_a_public_backbone(dns, admin_user, public_backbone):
    run = _run(admin_user, "demo", public_backbone, clif_cohort())
    assert run.pk
    assert EgressDecision.objects.get().terms == "open"


def test_an_attestation_for_another_host_does_not_clear_this_one(
    dns, admin_user, public_backbone
):
    _attest(admin_user, host="other.example.com")
    with pytest.raises(ValidationError):
        _run(admin_user, "x", public_backbone, mimic_cohort())


@pytest.mark.parametrize(
    "missing", ["zero_retention", "no_training", "no_human_review"]
)
def test_an_attestation_must_confirm_all_three_promises(admin_user, missing):
    fields = {
        "zero_retention": True,
        "no_training": True,
        "no_human_review": True,
        missing: False,
    }
    with pytest.raises(ValidationError) as refused:
        services.attestation_record(
            actor=admin_user,
            address=PUBLIC_HOST,
            source=data_source_get(MIMIC_IV),
            purpose=AttestationPurpose.BACKBONE,
            service="A service",
            evidence_url="https://example.com/terms",
            **fields,
        )
    assert "zero data retention" in " ".join(refused.value.messages)
    assert not Attestation.objects.exists()
    assert not AuditEvent.objects.exists()


def test_only_an_admin_attests_a_backbone(researcher):
    with pytest.raises(PermissionDenied):
        _attest(researcher)
    assert not Attestation.objects.exists()


# Reference agents and online endpoints ---------------------------------------------


def test_a_reference_agent_on_mimic_data_needs_an_attestation(
    dns, admin_user, mimic_release, public_backbone
):
    with pytest.raises(ValidationError) as refused:
        run_queued(user=admin_user, release=mimic_release, backbone=public_backbone)
    assert "third party" in " ".join(refused.value.messages)
    assert not AgentRun.objects.exists()
    _attest(admin_user)
    run = run_queued(user=admin_user, release=mimic_release, backbone=public_backbone)
    decision = EgressDecision.objects.get(allowed=True)
    assert decision.release_id == mimic_release.pk
    from datause.selectors import egress_decision_for_run

    assert egress_decision_for_run(run) == decision


def test_a_researchers_endpoint_needs_their_credential_and_approved_attestation(
    dns, admin_user, researcher, mimic_release
):
    url = "https://agent.example.org/predict"

    def register():
        return agents.endpoint_register(
            user=researcher, release=mimic_release, name="mine", url=url
        )

    # No credential: the release is not theirs to send anywhere.
    with pytest.raises(ValidationError) as refused:
        register()
    assert "credential" in " ".join(refused.value.messages)

    services.credential_record(
        actor=admin_user,
        user=researcher,
        source=data_source_get(MIMIC_IV),
        physionet_username="jdoe",
        agreement_version="PhysioNet Credentialed Health Data Use Agreement 1.5.0",
        signed_on=days(-3),
        expires_on=days(300),
    )
    # An admin's attestation of a backbone at that host is not the researcher's.
    _attest(admin_user, host="agent.example.org")
    with pytest.raises(ValidationError) as refused:
        register()
    assert "you record, and an admin approves" in " ".join(refused.value.messages)

    own = _attest(
        researcher, host="agent.example.org", purpose=AttestationPurpose.ENDPOINT
    )
    assert own.state == "requested"
    with pytest.raises(ValidationError):
        register()
    assert not OnlineEndpoint.objects.exists()

    services.attestation_approve(admin=admin_user, attestation=own)
    endpoint = register()
    run = agents.online_eval_start(user=researcher, endpoint=endpoint, enqueue=False)
    assert run.pk
    assert AuditEvent.objects.filter(kind=AuditKind.EGRESS_REFUSED).count() == 3
    assert AuditEvent.objects.filter(kind=AuditKind.ATTESTATION_APPROVED).count() == 2
    from datause.selectors import egress_decision_for_run

    decision = egress_decision_for_run(run)
    assert decision.attestations_snapshot[0]["approved_by"] == admin_user.username
    assert decision.attestations_snapshot[0]["attested_by"] == researcher.username


def test_an_endpoint_of_open_data_needs_nothing(dns, researcher, tiny_release):
    endpoint = agents.endpoint_register(
        user=researcher,
        release=tiny_release,
        name="demo",
        url="https://agent.example.org/predict",
    )
    assert endpoint.pk


def test_a_scale_release_records_its_oracle_runs_egress(
    dns, admin_user, tiny_stays, tiny_labels, public_backbone
):
    """The run's attestation is in the release's provenance."""
    from annotation.models import Campaign
    from exports.building import release_build
    from exports.models import ReleaseKind
    from exports.services import release_create
    from oracle.models import RunState
    from tests.exports.helpers import oracle_labels_store, validation_passed
    from windows.datasources import stays_link
    from windows.models import Cohort, CohortStay, CohortStratum

    stays = tiny_stays["stays"]
    stays_link(stay_ids=[s.pk for s in stays], keys=[MIMIC_IV])
    cohort = Cohort.objects.create(name="tiny", seed=0, target_size=3)
    for stay in stays:
        CohortStay.objects.create(
            cohort=cohort, stay=stay, stratum=CohortStratum.SURVIVED_SHORT
        )
    _attest(admin_user)
    run = _run(admin_user, "s", public_backbone, cohort)
    oracle_labels_store(
        run=run, labels=tiny_labels, backbone_kind=BackboneKind.OPENAI, model="gpt-test"
    )
    OracleRun.objects.filter(pk=run.pk).update(state=RunState.COMPLETED)
    run.refresh_from_db()
    gold = Campaign.objects.create(name="gold", created_by=admin_user)
    validation_passed(run=run, campaign=gold, admin=admin_user)
    release = release_create(user=admin_user, kind=ReleaseKind.SCALE, oracle_run=run)
    release = release_build(release=release)
    egress = release.manifest["data_use"]["oracle_run_egress"]
    assert egress["host"] == PUBLIC_HOST and not egress["on_site"]
    assert egress["attestations"][0]["service"].startswith("Example LLM")
