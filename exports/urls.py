"""Release pages, under releases/."""

from django.urls import path

from exports import views, views_budget

app_name = "exports"

urlpatterns = [
    path("", views.release_list, name="release_list"),
    path("build/", views.release_build_start, name="release_build_start"),
    path("new/", views.release_new, name="release_new"),
    path("token/", views.token_page, name="token"),
    path("token/create/", views.token_create, name="token_create"),
    path("token/revoke/", views.token_revoke, name="token_revoke"),
    path("<id:release_id>/", views.release_detail, name="release_detail"),
    path("<id:release_id>/progress/", views.release_progress, name="release_progress"),
    *(
        path(
            f"<id:release_id>/{action}/",
            views.release_action,
            {"action": action},
            name=f"release_{action}",
        )
        for action in views.RELEASE_ACTIONS
    ),
    path(
        "<id:release_id>/files/<path:file_path>",
        views.release_file,
        name="release_file",
    ),
    path("<id:release_id>/submit/", views.submission_upload, name="submission_upload"),
    path("<id:release_id>/leaderboard/", views.leaderboard, name="leaderboard"),
    path(
        "submissions/<id:submission_id>/",
        views.submission_detail,
        name="submission_detail",
    ),
    path(
        "submissions/<id:submission_id>/plots/<str:name>.png",
        views.submission_plot,
        name="submission_plot",
    ),
    path(
        "submissions/<id:submission_id>/budget/",
        views_budget.submission_budget,
        name="submission_budget",
    ),
    path(
        "submissions/<id:submission_id>/publish/",
        views.submission_publish,
        name="submission_publish",
    ),
]
