"""A release's manifest (sources, counts, settings, agreement and validation
reports, every file's size and sha256), the one helper that hashes a file, and
the folder's immutability: read-only once built, and each file checked against
its recorded sha256 before it is served."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from annotation.selectors.irr import campaign_irr
from evaluation.metrics import DEFAULT_K
from exports.building.labels import rater_pseudonym
from exports.building.stats import ReleaseStats
from exports.data_use import release_data_use_section
from exports.models import Release, ReleaseFile, ReleaseKind
from realicu_web.storage import StoredFile, object_store
from windows.windowing import window_settings

logger = logging.getLogger(__name__)

# 1.1: context lines name each event by its ``concept``; no coded records.
SCHEMA_VERSION = "1.2"


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None``: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``, read in blocks."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _file_entry(folder: Path, path: Path) -> dict:
    return {
        "path": path.relative_to(folder).as_posix(),
        "bytes": path.stat().st_size,
        "sha256": file_sha256(path),
    }


def folder_files(folder: Path) -> list[dict]:
    """Every file of a release folder with its size and checksum: the
    manifest's ``files``."""
    return [_file_entry(folder, p) for p in _files_under(folder)]


def manifest_write(folder: Path, manifest: dict, files: list[dict]) -> None:
    """Writes ``manifest.json`` into the release folder and adds it to
    ``files`` (the manifest cannot list its own checksum)."""
    path = folder / "manifest.json"
    path.write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False, allow_nan=False),
        encoding="utf-8",
    )
    files.append(_file_entry(folder, path))


def _remove_tree(path: Path) -> None:
    """Removes a folder left by a build that did not finish, read-only or not."""
    if not path.exists():
        return
    for root, _dirs, files in os.walk(path):
        os.chmod(root, stat.S_IRWXU)
        for name in files:
            os.chmod(os.path.join(root, name), stat.S_IRUSR | stat.S_IWUSR)
    shutil.rmtree(path)


def _make_read_only(folder: Path) -> None:
    for root, _dirs, files in os.walk(folder, topdown=False):
        for name in files:
            os.chmod(os.path.join(root, name), 0o444)
        os.chmod(root, 0o555)


def _source_section(release: Release) -> dict:
    if release.kind == ReleaseKind.GOLD:
        campaign = release.campaign
        return {
            "kind": "gold_campaign",
            "campaign_id": campaign.pk,
            "campaign_name": campaign.name,
            "annotators_per_window": campaign.annotators_per_window,
        }
    run = release.oracle_run
    snapshot = run.backbone_snapshot or {}
    return {
        "kind": "oracle_run",
        "oracle_run_id": run.pk,
        "oracle_run_name": run.name,
        "backbone_kind": snapshot.get("kind", ""),
        "model": snapshot.get("model", ""),
        "parameters": snapshot.get("parameters", {}),
        "prompt_version": run.prompt.version,
    }


def _agreement_report(release: Release) -> dict | None:
    if release.kind != ReleaseKind.GOLD:
        return None
    report = campaign_irr(campaign=release.campaign)
    for pair in report.get("pairs", []):
        pair["physicians"] = [
            rater_pseudonym(release=release, user_id=u) for u in pair["physicians"]
        ]
    return json_safe(report)


def _validation_report(release: Release) -> dict | None:
    report = release.validation_report
    if report is None:
        return None
    return json_safe(
        {
            "id": report.pk,
            "oracle_run_id": report.run_id,
            "gold_campaign_id": report.campaign_id,
            "created_at": report.created_at.isoformat(),
            "matcher_model": report.matcher_model,
            "tau": report.tau,
            "report": report.report,
        }
    )


def _promotion(release: Release) -> dict | None:
    """How a Scale release passed the promotion gate: the thresholds and, when
    an admin overrode them, who, when, why and which thresholds failed
    (oracle.models.PromotionOverride)."""
    if release.kind != ReleaseKind.SCALE or release.validation_report is None:
        return None
    from oracle.models import PromotionOverride
    from oracle.promotion_gate import promotion_gate

    override = (
        PromotionOverride.objects.select_related("created_by")
        .filter(release_id=release.pk)
        .first()
    )
    if override is None:
        gate = promotion_gate(report=release.validation_report)
        return json_safe(
            {
                "thresholds": gate["thresholds"],
                "failures": gate["failures"],
                "override": None,
            }
        )
    return json_safe(
        {
            "thresholds": override.thresholds,
            "failures": override.failures,
            "override": {
                "by": override.created_by.get_username(),
                "at": override.created_at.isoformat(),
                "reason": override.reason,
            },
        }
    )


def _rectifier(release: Release) -> dict | None:
    from exports.scoring_ppi import rectifier_manifest

    return rectifier_manifest(release)


def manifest_head(release: Release) -> dict:
    """The keys every release manifest opens with: which release, which schema,
    when it was built."""
    return {
        "name": release.name,
        "kind": release.kind,
        "title": release.get_kind_display(),
        "version": release.version,
        "schema_version": SCHEMA_VERSION,
        "built_at": timezone.now().isoformat(),
        "test_only": True,
    }


def _manifest(*, release: Release, stats: ReleaseStats, files: list[dict]) -> dict:
    return json_safe(
        {
            **manifest_head(release),
            "source": _source_section(release),
            "data_use": release_data_use_section(release, stay_ids=list(stats.stays)),
            "counts": stats.as_dict(),
            "settings": {
                "windows": window_settings(),
                "matcher_model": release.matcher_model,
                "tau": release.tau,
                "k": DEFAULT_K,
                "context": (
                    "events of the stay's hospital admission with time < the "
                    "window's end; outcome-revealing events and records coded "
                    "after discharge removed; drop window_action_event_ids "
                    "and window_companion_event_ids (the window's own "
                    "decisions) for Recommended Actions; labels and hindsight "
                    "are never model input"
                ),
            },
            "agreement_report": _agreement_report(release),
            "validation_report": _validation_report(release),
            "promotion": _promotion(release),
            # Scale: the windows that correct its scores' intervals (issue 33).
            "rectifier": _rectifier(release),
            "files": files,
        }
    )


class ReleaseFileChanged(Exception):
    """A release file on disk is not the file that was built: its checksum no
    longer matches the one recorded (ReleaseFile, the manifest)."""


def release_file_verify(*, entry: ReleaseFile, path: Path) -> None:
    """Raises ``ReleaseFileChanged`` unless the file at ``path`` is byte for
    byte the file built (its recorded sha256). Releases are immutable by this
    check, not by file modes, which root ignores. The file is hashed again
    whenever its size, inode, modification or change time differs from when it
    was last found intact (the change time cannot be set by a program: any
    write or chmod moves it), so a file served often is hashed once."""
    from django.core.cache import cache

    if isinstance(path, StoredFile):
        # In the object store: hashed again whenever its size, ETag or
        # modification time differs (any write of the key changes them).
        size = path.size()
        signature = path.signature()
    else:
        status = path.stat()
        size = status.st_size
        signature = (
            f"{status.st_size}:{status.st_ino}:{status.st_mtime_ns}:"
            f"{status.st_ctime_ns}"
        )
    key = f"release-file-intact:{entry.pk}:{entry.sha256}"
    if cache.get(key) == signature:
        return
    if size != entry.size_bytes or _sha256_of(path) != entry.sha256:
        logger.error(
            "release file %s/%s was changed after the build: its sha256 is not the "
            "recorded %s; it is not served",
            entry.release_id,
            entry.path,
            entry.sha256,
        )
        raise ReleaseFileChanged(
            f"The file {entry.path} of this release was changed after the release "
            "was built: its checksum no longer matches the one recorded in the "
            "manifest, so it is not served. An admin must restore it from a copy "
            "(or rebuild the release as a new version)."
        )
    cache.set(key, signature, None)


def _sha256_of(path) -> str:
    return path.sha256() if isinstance(path, StoredFile) else file_sha256(path)


def release_folder(release: Release) -> Path:
    return Path(settings.REALICU_RELEASES_DIR) / release.directory


def release_store_prefix(name: str) -> str:
    """Where a release's files live in the object store: ``releases/<name>/``."""
    return f"releases/{name}/"


def release_published_exists(name: str) -> bool:
    """Whether a release named ``name`` already has files where releases are
    published (its folder, or its manifest in the object store, copied after
    every other file): such files are never rewritten."""
    store = object_store()
    if store is None:
        return (Path(settings.REALICU_RELEASES_DIR) / name).exists()
    return store.exists(release_store_prefix(name) + "manifest.json")


def release_file_source(release: Release, path: str) -> Path | StoredFile | None:
    """Where the file ``path`` of a published release is read from: its local
    file, or its object in the store; None when it is not there."""
    store = object_store()
    if store is None:
        absolute = release_folder(release) / path
        return absolute if absolute.is_file() else None
    stored = StoredFile(store, release_store_prefix(release.directory) + path)
    return stored if stored.exists() else None
