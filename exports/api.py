"""The researcher REST API (token authentication; researchers and admins only):
releases with their manifests, their files (streamed, ETag and Range), their
window records, and prediction submissions with their scores; for admins only,
the Oracle runs with their validation against Gold (spec section 7)."""

from __future__ import annotations

import math

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import user_is_admin
from evaluation.metrics import DEFAULT_K
from exports import selectors, services
from exports.authentication import ReleaseTokenAuthentication
from exports.building import ReleaseFileChanged
from exports.downloads import AnyFileRenderer, release_file_serve
from exports.models import ReleaseKind, ReleaseState, SubmissionState
from exports.roles import user_may_use_releases
from exports.scoring import MAX_K
from exports.throttling import AtomicScopedRateThrottle
from oracle.models import RunState
from windows.models import DiseaseGroup

MAX_ID = 2**63 - 1
# A release built from credentialed data, for an account without the credential.
CREDENTIAL_403 = OpenApiResponse(
    description="The release is built from credentialed (or site-restricted) "
    "data, and your account records no approved, unexpired credential for "
    "its sources (the Data use page)."
)


class MayUseReleases(BasePermission):
    message = "Only researchers and admins can use the release API."

    def has_permission(self, request, view) -> bool:
        return user_may_use_releases(request.user)


class ReleaseApi(APIView):
    # Tokens only: the API is for programs, and a request without credentials
    # gets 401 with "WWW-Authenticate: Token". No session: a forged session
    # cookie never reaches the session store through the API.
    authentication_classes = [ReleaseTokenAuthentication]
    permission_classes = [IsAuthenticated, MayUseReleases]
    throttle_classes = [AtomicScopedRateThrottle]
    throttle_scope = "releases"

    def paginated(self, rows, serializer_class) -> Response:
        """A page of ``rows`` (the view's ``pagination_class``) in
        ``serializer_class``, with the links to the next and previous."""
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)

    def release_or_404(self, release_id: int):
        release = selectors.release_get(user=self.request.user, release_id=release_id)
        if release is None:
            raise NotFound("No such release.")
        return release

    def submission_or_404(self, submission_id: int):
        submission = selectors.submission_get(
            user=self.request.user, submission_id=submission_id
        )
        if submission is None:
            raise NotFound("No such submission.")
        return submission


class RecordPagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


# Releases -------------------------------------------------------------------


class ReleaseFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    bytes = serializers.IntegerField(source="size_bytes")
    sha256 = serializers.CharField()


class ReleaseOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=ReleaseKind.choices)
    version = serializers.IntegerField()
    state = serializers.ChoiceField(choices=ReleaseState.choices)
    window_count = serializers.IntegerField()
    matcher_model = serializers.CharField()
    tau = serializers.FloatField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    manifest = serializers.JSONField()
    files = ReleaseFileSerializer(many=True, source="published_files")


class ReleaseListApi(ReleaseApi):
    pagination_class = RecordPagination

    @extend_schema(
        operation_id="releases_list",
        summary="List releases with their manifests",
        responses=ReleaseOutputSerializer(many=True),
    )
    def get(self, request):
        releases = selectors.release_list(user=request.user).prefetch_related("files")
        return self.paginated(releases, ReleaseOutputSerializer)


class ReleaseDetailApi(ReleaseApi):
    @extend_schema(
        operation_id="releases_retrieve",
        summary="One release with its manifest and files",
        responses={
            200: ReleaseOutputSerializer,
            403: CREDENTIAL_403,
            404: OpenApiResponse(description="No such release."),
        },
    )
    def get(self, request, release_id: int):
        return Response(ReleaseOutputSerializer(self.release_or_404(release_id)).data)


# Files ----------------------------------------------------------------------


class ReleaseFileApi(ReleaseApi):
    renderer_classes = [JSONRenderer, AnyFileRenderer]
    throttle_scope = "release_downloads"

    @extend_schema(
        operation_id="releases_files_retrieve",
        summary="Download a release file (streamed; ETag, If-None-Match, Range)",
        parameters=[
            OpenApiParameter(
                "file_path",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                description="Path inside the release, e.g. windows.jsonl or "
                "context/123.jsonl, as listed in the release's files.",
            ),
            OpenApiParameter(
                "Range", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False
            ),
            OpenApiParameter(
                "If-None-Match",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                required=False,
            ),
        ],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (206, "application/octet-stream"): OpenApiTypes.BINARY,
            304: OpenApiResponse(description="Not modified (ETag matched)."),
            403: CREDENTIAL_403,
            404: OpenApiResponse(description="No such release or file."),
            409: OpenApiResponse(
                description="The file was changed after the release was built "
                "(its checksum no longer matches the manifest's); it is not served."
            ),
            416: OpenApiResponse(description="Range not satisfiable."),
        },
    )
    def get(self, request, release_id: int, file_path: str):
        try:
            response = release_file_serve(
                request, release_id=release_id, file_path=file_path
            )
        except ReleaseFileChanged as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        if response is None:
            raise NotFound("No such file in this release.")
        return response


# Window records -------------------------------------------------------------


class WindowFilterSerializer(serializers.Serializer):
    stay_id = serializers.IntegerField(required=False, min_value=0, max_value=MAX_ID)
    disease_group = serializers.ChoiceField(
        choices=DiseaseGroup.choices, required=False
    )
    hours_min = serializers.FloatField(required=False)
    hours_max = serializers.FloatField(required=False)

    def validate(self, data):
        for name in ("hours_min", "hours_max"):
            if name in data and not math.isfinite(data[name]):
                raise serializers.ValidationError({name: "Must be a finite number."})
        return data


class WindowRecordSerializer(serializers.Serializer):
    window_id = serializers.IntegerField()
    stay_id = serializers.IntegerField()
    disease_group = serializers.CharField()
    hours_since_admit = serializers.FloatField()
    record = serializers.JSONField(
        help_text="The window's line of windows.jsonl: times, context file, the "
        "window's own action ids, labels with evidence and provenance."
    )


class ReleaseWindowListApi(ReleaseApi):
    pagination_class = RecordPagination

    @extend_schema(
        operation_id="releases_windows_list",
        summary="Page through a release's window records, with filters",
        parameters=[
            WindowFilterSerializer,
            OpenApiParameter(
                "page", OpenApiTypes.INT, OpenApiParameter.QUERY, required=False
            ),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, OpenApiParameter.QUERY, required=False
            ),
        ],
        responses={
            200: WindowRecordSerializer(many=True),
            403: CREDENTIAL_403,
            404: OpenApiResponse(description="No such release."),
        },
    )
    def get(self, request, release_id: int):
        release = self.release_or_404(release_id)
        filters = WindowFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        records = selectors.release_windows(
            release=release,
            stay_id=filters.validated_data.get("stay_id"),
            disease_group=filters.validated_data.get("disease_group"),
            hours_min=filters.validated_data.get("hours_min"),
            hours_max=filters.validated_data.get("hours_max"),
        )
        return self.paginated(records, WindowRecordSerializer)


# Submissions ----------------------------------------------------------------


class SubmissionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    release_id = serializers.IntegerField()
    model_name = serializers.CharField()
    k = serializers.IntegerField()
    public = serializers.BooleanField()
    state = serializers.ChoiceField(choices=SubmissionState.choices)
    prediction_count = serializers.IntegerField()
    sha256 = serializers.CharField()
    created_at = serializers.DateTimeField()
    scored_at = serializers.DateTimeField(allow_null=True)
    scores = serializers.JSONField(
        help_text="Once scored: overall, by_disease_group and by_hours_since_admit, "
        "each with the section-6 metrics and their counts. On a Scale release "
        "whose Oracle run was validated on physician windows, intervals: per "
        "figure the estimate against physicians with its 95 % confidence "
        "interval (lower, upper, se; prediction-powered inference, PPI++: the "
        "score against the Oracle's labels corrected by the windows that also "
        "have a physician consensus), the Oracle-only and Gold-only figures, "
        "and the effective number of Gold windows (null otherwise)."
    )
    error = serializers.CharField()


class SubmissionInputSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="JSONL, one object per line: {window_id, status, acute_problems[], "
        "recommended_actions[]} with ranked lists."
    )
    model_name = serializers.CharField(max_length=100)
    k = serializers.IntegerField(
        required=False, default=DEFAULT_K, min_value=1, max_value=MAX_K
    )
    public = serializers.BooleanField(required=False, default=False)


class ErrorSerializer(serializers.Serializer):
    detail = serializers.ListField(child=serializers.CharField())


class ReleaseSubmissionsApi(ReleaseApi):
    parser_classes = [MultiPartParser, FormParser]
    pagination_class = RecordPagination

    def get_throttles(self):
        # Uploads are heavy: their own, lower rate.
        self.throttle_scope = (
            "submissions" if self.request.method == "POST" else "releases"
        )
        return super().get_throttles()

    @extend_schema(
        operation_id="releases_submissions_list",
        summary="Your submissions for a release",
        responses={
            200: SubmissionOutputSerializer(many=True),
            403: CREDENTIAL_403,
            404: OpenApiResponse(description="No such release."),
        },
    )
    def get(self, request, release_id: int):
        release = self.release_or_404(release_id)
        submissions = selectors.submission_list(user=request.user, release=release)
        return self.paginated(submissions, SubmissionOutputSerializer)

    @extend_schema(
        operation_id="releases_submissions_create",
        summary="Submit predictions; scored by a background job once valid",
        request={"multipart/form-data": SubmissionInputSerializer},
        responses={
            201: SubmissionOutputSerializer,
            400: ErrorSerializer,
            403: CREDENTIAL_403,
            404: OpenApiResponse(description="No such release."),
            409: ErrorSerializer,
        },
    )
    def post(self, request, release_id: int):
        release = self.release_or_404(release_id)
        if release.state != ReleaseState.READY:
            # Before the upload is read: a release that is not ready takes none.
            return Response(
                {
                    "detail": [
                        f"{release} is {release.get_state_display().lower()}, not "
                        "ready: "
                        "predictions can only be submitted to a ready release."
                    ]
                },
                status=status.HTTP_409_CONFLICT,
            )
        data = SubmissionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        submission = services.submission_create(
            user=request.user,
            release=release,
            upload=values["file"],
            model_name=values["model_name"],
            k=values["k"],
            public=values["public"],
        )
        return Response(
            SubmissionOutputSerializer(submission).data, status=status.HTTP_201_CREATED
        )


class SubmissionDetailApi(ReleaseApi):
    @extend_schema(
        operation_id="submissions_retrieve",
        summary="A submission and, once scored, its scores",
        responses={
            200: SubmissionOutputSerializer,
            404: OpenApiResponse(description="No such submission."),
        },
    )
    def get(self, request, submission_id: int):
        submission = self.submission_or_404(submission_id)
        return Response(SubmissionOutputSerializer(submission).data)


class PublishInputSerializer(serializers.Serializer):
    public = serializers.BooleanField()


class SubmissionPublishApi(ReleaseApi):
    @extend_schema(
        operation_id="submissions_publish",
        summary="Show your submission on the release's leaderboard, or hide it",
        request=PublishInputSerializer,
        responses={
            200: SubmissionOutputSerializer,
            403: OpenApiResponse(description="Not yours."),
            404: OpenApiResponse(description="No such submission."),
        },
    )
    def post(self, request, submission_id: int):
        data = PublishInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        submission = self.submission_or_404(submission_id)
        submission = services.submission_publish(
            user=request.user,
            submission=submission,
            public=data.validated_data["public"],
        )
        return Response(SubmissionOutputSerializer(submission).data)


# Oracle runs and their validation (admins) -----------------------------------


class IsReleaseAdmin(BasePermission):
    message = (
        "Only admins can read Oracle runs and their validation reports; a "
        "researcher finds the report in the manifest of a RealICU-Scale release "
        "built from the run."
    )

    def has_permission(self, request, view) -> bool:
        return user_is_admin(request.user)


class ValidationReportSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    oracle_run_id = serializers.IntegerField(source="run_id")
    gold_campaign_id = serializers.IntegerField(source="campaign_id")
    gold_campaign_name = serializers.CharField(source="campaign.name")
    created_at = serializers.DateTimeField()
    matcher_model = serializers.CharField()
    tau = serializers.FloatField()
    report = serializers.JSONField(
        help_text="Oracle vs Gold consensus as the paper's Table 1: status macro-F1, "
        "accuracy and confusion matrix; precision, recall and semantic F1 of the set "
        "tasks; the same per disease group; the windows compared and left out."
    )


class OracleRunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=RunState.choices)
    backbone_kind = serializers.SerializerMethodField()
    model = serializers.SerializerMethodField()
    prompt_version = serializers.CharField(source="prompt.version")
    total_windows = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    latest_validation_report = serializers.SerializerMethodField()

    def get_backbone_kind(self, run) -> str:
        return (run.backbone_snapshot or {}).get("kind", "")

    def get_model(self, run) -> str:
        return (run.backbone_snapshot or {}).get("model", "")

    @extend_schema_field(ValidationReportSerializer(allow_null=True))
    def get_latest_validation_report(self, run):
        report = selectors.run_latest_report(run)
        return ValidationReportSerializer(report).data if report is not None else None


class OracleRunDetailSerializer(OracleRunOutputSerializer):
    validation_reports = ValidationReportSerializer(
        many=True, source="reports", help_text="Every report of the run, newest first."
    )


class OracleAdminApi(ReleaseApi):
    permission_classes = [IsAuthenticated, IsReleaseAdmin]


class OracleRunListApi(OracleAdminApi):
    pagination_class = RecordPagination

    @extend_schema(
        operation_id="oracle_runs_list",
        summary="Oracle runs with their latest validation report (admins)",
        responses={
            200: OracleRunOutputSerializer(many=True),
            403: OpenApiResponse(description="Not an admin."),
        },
    )
    def get(self, request):
        runs = selectors.oracle_runs_with_reports(user=request.user)
        return self.paginated(runs, OracleRunOutputSerializer)


class OracleRunDetailApi(OracleAdminApi):
    @extend_schema(
        operation_id="oracle_runs_retrieve",
        summary="One Oracle run with all its validation reports (admins)",
        responses={
            200: OracleRunDetailSerializer,
            403: OpenApiResponse(description="Not an admin."),
            404: OpenApiResponse(description="No such Oracle run."),
        },
    )
    def get(self, request, run_id: int):
        run = (
            selectors.oracle_runs_with_reports(user=request.user)
            .filter(pk=run_id)
            .first()
        )
        if run is None:
            raise NotFound("No such Oracle run.")
        return Response(OracleRunDetailSerializer(run).data)
