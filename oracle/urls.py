"""The admin's Oracle pages."""

from django.urls import path

from oracle import views

app_name = "oracle"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("gold-draw/", views.gold_draw, name="gold_draw"),
    path("runs/<id:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<id:run_id>/progress/", views.run_progress, name="run_progress"),
    *(
        path(
            f"runs/<id:run_id>/{verb}/",
            views.run_action,
            {"action": action},
            name=action,
        )
        for action, verb in (
            ("run_cancel", "cancel"),
            ("run_retry_failed", "retry-failed"),
        )
    ),
    path("runs/<id:run_id>/resume/", views.run_resume, name="run_resume"),
    path("runs/<id:run_id>/labels/", views.run_labels, name="run_labels"),
    path(
        "runs/<id:run_id>/labels/<id:label_id>/",
        views.run_label,
        name="run_label",
    ),
    path("runs/<id:run_id>/validation/", views.run_validation, name="run_validation"),
    path("runs/<id:run_id>/validate/", views.run_validate, name="run_validate"),
    path(
        "runs/<id:run_id>/validations/<id:job_id>/progress/",
        views.validation_progress,
        name="validation_progress",
    ),
    path("backbones/", views.backbone_list, name="backbone_list"),
    path("backbones/new/", views.backbone_new, name="backbone_new"),
    path("backbones/<id:backbone_id>/", views.backbone_edit, name="backbone_edit"),
]
