"""Where a submission's prediction file and its plots live: the submissions
folder, or under ``submissions/`` in the object store (realicu_web.storage),
where every worker reads them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from exports.models import Submission
from realicu_web.storage import StoredFile, object_store, store_put


def _submissions_dir() -> Path:
    path = Path(settings.REALICU_SUBMISSIONS_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def submission_folder(submission: Submission) -> Path:
    return _submissions_dir() / submission.release.name


def submission_plots_dir(submission: Submission) -> Path:
    return submission_folder(submission) / f"{submission.pk}-plots"


def _submission_key(relative: str) -> str:
    return f"submissions/{relative}"


def submission_file_put(*, relative: str, source: Path) -> None:
    """Moves a checked prediction file from ``source`` to where submissions
    live: ``relative`` under the submissions folder, or under ``submissions/``
    in the object store (realicu_web.storage), where every worker reads it."""
    store = object_store()
    if store is None:
        folder = _submissions_dir()
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, folder / relative)
        return
    # Not write-once: the key is the submission's id, which SQLite may give
    # again after a rolled-back upload.
    store_put(store, _submission_key(relative), source)
    source.unlink(missing_ok=True)


@contextmanager
def submission_file_local(submission: Submission) -> Iterator[Path]:
    """The submission's prediction file as a local path: its file in the
    submissions folder, or a copy of its object in the store checked against
    the sha256 recorded at upload (removed afterwards)."""
    store = object_store()
    if store is None:
        yield _submissions_dir() / submission.file_path
        return
    stored = StoredFile(store, _submission_key(submission.file_path))
    with tempfile.TemporaryDirectory(prefix="realicu-submission-") as folder:
        local = Path(folder) / stored.name
        stored.download(local)
        from exports.building.manifest import file_sha256

        if file_sha256(local) != submission.sha256:
            raise ValidationError(
                f"The stored file of submission {submission.pk} is not the file "
                "uploaded: its checksum does not match the one recorded."
            )
        yield local


def submission_plot_source(
    submission: Submission, name: str
) -> Path | StoredFile | None:
    """Where the plot ``name`` of a scored submission is read from, or None."""
    store = object_store()
    if store is None:
        path = submission_plots_dir(submission) / f"{name}.png"
        return path if path.is_file() else None
    stored = StoredFile(
        store,
        _submission_key(f"{submission.release.name}/{submission.pk}-plots/{name}.png"),
    )
    return stored if stored.exists() else None


def submission_plot_put(submission: Submission, name: str, source: Path) -> None:
    """Stores the plot ``name`` of a submission in the object store."""
    store_put(
        object_store(),
        _submission_key(f"{submission.release.name}/{submission.pk}-plots/{name}.png"),
        source,
    )
