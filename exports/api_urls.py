"""The researcher REST API, under api/v1/."""

from django.urls import path

from exports import api

app_name = "exports_api"

urlpatterns = [
    path("releases/", api.ReleaseListApi.as_view(), name="release_list"),
    path(
        "releases/<id:release_id>/",
        api.ReleaseDetailApi.as_view(),
        name="release_detail",
    ),
    path(
        "releases/<id:release_id>/files/<path:file_path>",
        api.ReleaseFileApi.as_view(),
        name="release_file",
    ),
    path(
        "releases/<id:release_id>/windows/",
        api.ReleaseWindowListApi.as_view(),
        name="release_windows",
    ),
    path(
        "releases/<id:release_id>/submissions/",
        api.ReleaseSubmissionsApi.as_view(),
        name="release_submissions",
    ),
    path(
        "submissions/<id:submission_id>/",
        api.SubmissionDetailApi.as_view(),
        name="submission_detail",
    ),
    path(
        "submissions/<id:submission_id>/publish/",
        api.SubmissionPublishApi.as_view(),
        name="submission_publish",
    ),
    path("oracle/runs/", api.OracleRunListApi.as_view(), name="oracle_run_list"),
    path(
        "oracle/runs/<id:run_id>/",
        api.OracleRunDetailApi.as_view(),
        name="oracle_run_detail",
    ),
]
