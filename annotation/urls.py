"""The physician's queue and annotation pages; the admin's campaign pages."""

from django.urls import path

from annotation import views

app_name = "annotation"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("<int:assignment_id>/", views.annotate, name="annotate"),
    path("<int:assignment_id>/draft/", views.draft, name="draft"),
    path("<int:assignment_id>/submit/", views.submit, name="submit"),
    path("<int:assignment_id>/reopen/", views.reopen, name="reopen"),
    path("<int:assignment_id>/suggest/", views.suggest, name="suggest"),
    path("campaigns/", views.campaign_list, name="campaign_list"),
    path("campaigns/new/", views.campaign_new, name="campaign_new"),
    path("campaigns/<int:campaign_id>/", views.campaign_detail, name="campaign_detail"),
    path(
        "campaigns/<int:campaign_id>/add/",
        views.campaign_assignment_add,
        name="campaign_assignment_add",
    ),
    path(
        "campaigns/<int:campaign_id>/assignments/<int:assignment_id>/reassign/",
        views.campaign_assignment_reassign,
        name="campaign_assignment_reassign",
    ),
]
