"""The physician's queue and annotation pages; the admin's campaign pages."""

from django.urls import path

from annotation import views, views_adjudication, views_calibration

app_name = "annotation"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("<id:assignment_id>/", views.annotate, name="annotate"),
    path("<id:assignment_id>/draft/", views.draft, name="draft"),
    path("<id:assignment_id>/submit/", views.submit, name="submit"),
    path("<id:assignment_id>/reopen/", views.reopen, name="reopen"),
    path("<id:assignment_id>/suggest/", views.suggest, name="suggest"),
    path("campaigns/", views.campaign_list, name="campaign_list"),
    path("campaigns/new/", views.campaign_new, name="campaign_new"),
    path("campaigns/<id:campaign_id>/", views.campaign_detail, name="campaign_detail"),
    path(
        "campaigns/<id:campaign_id>/add/",
        views.campaign_assignment_add,
        name="campaign_assignment_add",
    ),
    path(
        "campaigns/<id:campaign_id>/assignments/<id:assignment_id>/reassign/",
        views.campaign_assignment_reassign,
        name="campaign_assignment_reassign",
    ),
    path(
        "campaigns/<id:campaign_id>/adjudication/",
        views_adjudication.adjudication_queue,
        name="adjudication_queue",
    ),
    path(
        "campaigns/<id:campaign_id>/adjudication/<id:window_id>/",
        views_adjudication.adjudication_window,
        name="adjudication_window",
    ),
    path(
        "campaigns/<id:campaign_id>/adjudication/<id:window_id>/decide/",
        views_adjudication.adjudication_decide,
        name="adjudication_decide",
    ),
    path(
        "campaigns/<id:campaign_id>/adjudication/<id:window_id>/merge/",
        views_adjudication.adjudication_merge,
        name="adjudication_merge",
    ),
    path(
        "campaigns/<id:campaign_id>/adjudication/<id:window_id>/recompute/",
        views_adjudication.adjudication_recompute_window,
        name="adjudication_recompute_window",
    ),
    path(
        "campaigns/<id:campaign_id>/irr/",
        views_adjudication.irr_dashboard,
        name="irr_dashboard",
    ),
    path(
        "campaigns/<id:campaign_id>/recompute/",
        views_adjudication.campaign_recompute,
        name="campaign_recompute",
    ),
    path(
        "campaigns/<id:campaign_id>/recompute/progress/",
        views_adjudication.campaign_recompute_progress,
        name="campaign_recompute_progress",
    ),
    path("calibration/", views_calibration.calibration_list, name="calibration_list"),
    path(
        "calibration/draw/", views_calibration.calibration_draw, name="calibration_draw"
    ),
    path(
        "calibration/draw/<id:draw_id>/",
        views_calibration.calibration_draw_progress,
        name="calibration_draw_progress",
    ),
    path(
        "calibration/reference/",
        views_calibration.calibration_reference,
        name="calibration_reference",
    ),
    path(
        "calibration/<id:set_id>/",
        views_calibration.calibration_judge,
        name="calibration_judge",
    ),
    path(
        "calibration/<id:set_id>/judge/",
        views_calibration.calibration_judge_post,
        name="calibration_judge_post",
    ),
    path(
        "calibration/<id:set_id>/report/",
        views_calibration.calibration_report,
        name="calibration_report",
    ),
    path(
        "calibration/<id:set_id>/invite/",
        views_calibration.calibration_invite,
        name="calibration_invite",
    ),
    path(
        "calibration/<id:set_id>/withdraw/",
        views_calibration.calibration_invitation_withdraw,
        name="calibration_invitation_withdraw",
    ),
    path(
        "calibration/<id:set_id>/adopt/",
        views_calibration.calibration_adopt,
        name="calibration_adopt",
    ),
]
