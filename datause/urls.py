"""Data-use pages, under data-use/."""

from django.urls import path

from datause import views

app_name = "datause"

urlpatterns = [
    path("", views.data_use, name="data_use"),
    path("credentials/", views.credential_record, name="credential_record"),
    path(
        "credentials/<id:credential_id>/approve/",
        views.credential_approve,
        name="credential_approve",
    ),
    path(
        "credentials/<id:credential_id>/revoke/",
        views.credential_revoke,
        name="credential_revoke",
    ),
    path("attestations/", views.attestation_record, name="attestation_record"),
    path(
        "attestations/<id:attestation_id>/approve/",
        views.attestation_approve,
        name="attestation_approve",
    ),
    path(
        "attestations/<id:attestation_id>/revoke/",
        views.attestation_revoke,
        name="attestation_revoke",
    ),
    path("audit/", views.audit, name="audit"),
]
