"""Which server-side folders an import started from a page may read."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError


def resolve_import_path(*, source: str, path: str) -> str:
    """The resolved folder, which must exist and lie under one of
    ``REALICU_IMPORT_ROOTS``; empty for the CLIF demo."""
    if not path:
        if source == "clif":
            return ""
        raise ValidationError("A MIMIC-IV import needs a folder with hosp/ and icu/.")
    folder = Path(path).resolve()
    roots = [Path(r).resolve() for r in settings.REALICU_IMPORT_ROOTS]
    if not any(folder == root or root in folder.parents for root in roots):
        raise ValidationError(
            f"{path} is outside the import folders ({', '.join(map(str, roots))})."
        )
    if not folder.is_dir():
        raise ValidationError(f"{path} is not a folder.")
    return str(folder)
