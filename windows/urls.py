"""Pages for imported clinical data."""

from django.urls import path

from windows import views

app_name = "windows"

urlpatterns = [
    path("stays/", views.stay_list, name="stay_list"),
    path("stays/<id:stay_id>/", views.stay_detail, name="stay_detail"),
    path(
        "stays/<id:stay_id>/windows/<id:index>/",
        views.window_detail,
        name="window_detail",
    ),
    path(
        "stays/<id:stay_id>/tracks.json",
        views.stay_tracks_json,
        name="stay_tracks_json",
    ),
    path("imports/", views.import_list, name="import_list"),
    path("imports/start/", views.import_start, name="import_start"),
    path(
        "imports/<id:import_run_id>/progress/",
        views.import_progress,
        name="import_progress",
    ),
    *(
        path(address, views.job_action, {"action": action}, name=action)
        for action, address in (
            ("import_resume", "imports/<id:run_id>/resume/"),
            ("import_cancel", "imports/<id:run_id>/cancel/"),
            ("build_resume", "imports/builds/<id:run_id>/resume/"),
            ("build_cancel", "imports/builds/<id:run_id>/cancel/"),
        )
    ),
]
