"""The release pages' posts as one call each: a release's build with the
warning it may carry, and an upload of predictions with the release's readiness
checked first (exports.services)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from exports.models import Release, ReleaseKind, Submission
from exports.services import (
    gold_open_windows_warning,
    release_create,
    release_require_ready,
    submission_create,
)


class ReleaseNotReady(ValidationError):
    """Predictions sent to a release that is not ready (a 409, not a 400)."""


def release_build_request(*, user, **arguments) -> tuple[Release, str]:
    """Queue a release's build (``release_create``), with the warning a Gold
    build of a campaign with open windows gets ("" for none)."""
    release = release_create(user=user, **arguments)
    warning = ""
    if release.campaign_id and release.kind == ReleaseKind.GOLD:
        warning = gold_open_windows_warning(release.campaign)
    return release, warning


def submission_upload(
    *, user, release: Release, prediction: dict | None
) -> Submission | None:
    """Accept an upload of predictions to the release (``submission_create``
    with ``prediction``'s upload, model_name, k and public). A release that is
    not ready is refused first (ReleaseNotReady), whatever the upload; None
    when there is no valid upload (``prediction`` None) to accept."""
    try:
        release_require_ready(release)
    except ValidationError as error:
        raise ReleaseNotReady(error.messages) from error
    if prediction is None:
        return None
    return submission_create(user=user, release=release, **prediction)
