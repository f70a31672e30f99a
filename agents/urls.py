"""Agent pages, under agents/."""

from django.urls import path

from agents import views

app_name = "agents"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/start/", views.run_start, name="run_start"),
    path("endpoints/start/", views.endpoint_start, name="endpoint_start"),
    path("runs/<id:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<id:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<id:run_id>/resume/", views.run_resume, name="run_resume"),
    path(
        "runs/<id:run_id>/stays/<id:stay_state_id>/",
        views.stay_memory,
        name="stay_memory",
    ),
]
