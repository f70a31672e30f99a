"""The object store shared by every machine (issue 36): release files,
submissions and their plots under one bucket of an S3-compatible store, through
Django's storage API (the ``realicu`` entry of ``STORAGES``, django-storages'
S3 backend). Without that entry (the embedded default) there is no object
store and the files stay in the local folders under ``REALICU_VAR_DIR``. In the
project package, so that every app may use it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages

STORE = "realicu"
CHUNK = 1024 * 1024


def object_store() -> Storage | None:
    """The shared object store, or None when files stay in local folders."""
    if STORE not in settings.STORAGES:
        return None
    return storages[STORE]


class KeyTaken(Exception):
    """A write-once key already holds an object."""


def store_put_new(store: Storage, key: str, source: Path) -> None:
    """Writes the local file ``source`` to ``key``, which must be new: the keys
    of a release are written once and never again. (The check and the write
    are two requests; a release's keys are written by the one worker holding
    its build's lease, so nobody races it for them.)"""
    if store.exists(key):
        raise KeyTaken(
            f"The object {key} already exists in the object store, and a "
            "release's files are never rewritten."
        )
    _save_at(store, key, source)


def store_put(store: Storage, key: str, source: Path) -> None:
    """Writes the local file ``source`` to ``key``, replacing what is there
    (files derived again by a rerun, such as a submission's plots). A store
    that overwrites (the S3 backend with ``file_overwrite``) replaces the
    object in the one write, so a reader meanwhile gets the old object or the
    new, never none, and no request asks first; a store that would rename
    onto a free key instead (FileSystemStorage without ``allow_overwrite``)
    has the old one deleted first."""
    if store.get_available_name(key) != key:
        store.delete(key)
    _save_at(store, key, source)


def _save_at(store: Storage, key: str, source: Path) -> None:
    """Saves ``source`` at ``key`` exactly: a save the store put under another
    name (a backend that renames rather than overwrites, or the key written
    meanwhile by someone else) is deleted and refused, never kept as a copy."""
    with open(source, "rb") as handle:
        saved = store.save(key, File(handle))
    if saved != key:
        store.delete(saved)
        raise KeyTaken(f"The object store renamed {key} to {saved}.")


def store_keys(store: Storage, prefix: str) -> list[str]:
    """Every key under ``prefix`` (a folder-like path ending in ``/``)."""
    keys = []
    folders = [prefix.rstrip("/")]
    while folders:
        folder = folders.pop()
        try:
            subfolders, files = store.listdir(folder)
        except FileNotFoundError:
            continue
        keys.extend(f"{folder}/{name}" for name in files)
        folders.extend(f"{folder}/{name}" for name in subfolders)
    return sorted(keys)


def store_remove_prefix(store: Storage, prefix: str) -> None:
    """Delete every key under ``prefix``; in a local folder (Django's
    FileSystemStorage, which leaves a file's folders behind) the folders left
    empty under it go too."""
    for key in store_keys(store, prefix):
        store.delete(key)
    if not isinstance(store, FileSystemStorage):
        return
    top = Path(store.path(prefix.rstrip("/")))
    if not top.is_dir():
        return
    for folder in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    if not any(top.iterdir()):
        top.rmdir()


def _s3_object(store: Storage, key: str):
    """The boto3 object of ``key`` when ``store`` is django-storages' S3
    backend, else None."""
    if not hasattr(store, "bucket") or not hasattr(store, "_normalize_name"):
        return None
    from storages.utils import clean_name

    return store.bucket.Object(store._normalize_name(clean_name(key)))


class StoredFile:
    """A file in the object store, read in blocks (or by byte range) without
    holding it in memory or on the local disk."""

    def __init__(self, store: Storage, key: str):
        self.store = store
        self.key = key
        self.name = key.rsplit("/", 1)[-1]
        self._head = None

    def __repr__(self) -> str:
        return f"StoredFile({self.key!r})"

    def _meta(self):
        if self._head is None:
            obj = _s3_object(self.store, self.key)
            if obj is not None:
                obj.load()
                self._head = (obj.content_length, obj.e_tag, obj.last_modified)
            else:
                self._head = (
                    self.store.size(self.key),
                    "",
                    self.store.get_modified_time(self.key),
                )
        return self._head

    def exists(self) -> bool:
        return self.store.exists(self.key)

    def size(self) -> int:
        return self._meta()[0]

    def signature(self) -> str:
        """Changes whenever the object is written again (size, ETag, time)."""
        size, etag, modified = self._meta()
        return f"{size}:{etag}:{modified.isoformat() if modified else ''}"

    def chunks(self, first: int = 0, length: int | None = None) -> Iterator[bytes]:
        """The object's bytes from ``first``, ``length`` of them (all when None)."""
        obj = _s3_object(self.store, self.key)
        if obj is not None:
            if first or length is not None:
                last = "" if length is None else str(first + length - 1)
                body = obj.get(Range=f"bytes={first}-{last}")["Body"]
            else:
                body = obj.get()["Body"]
            try:
                yield from body.iter_chunks(CHUNK)
            finally:
                body.close()
            return
        with self.store.open(self.key, "rb") as handle:
            handle.seek(first)
            left = length
            while left is None or left > 0:
                block = handle.read(CHUNK if left is None else min(CHUNK, left))
                if not block:
                    break
                if left is not None:
                    left -= len(block)
                yield block

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for block in self.chunks():
            digest.update(block)
        return digest.hexdigest()

    def download(self, target: Path) -> None:
        with open(target, "wb") as out:
            for block in self.chunks():
                out.write(block)

    def url(self) -> str:
        """A short-lived presigned address of the object (S3), for a redirect."""
        return self.store.url(
            self.key, expire=settings.REALICU_OBJECT_STORAGE_URL_SECONDS
        )
