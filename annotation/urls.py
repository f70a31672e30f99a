"""The physician's queue and annotation pages."""

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
]
