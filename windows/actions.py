"""Which recorded events are clinical decisions (actions): one definition for every
source, applied after an import batch and by ``manage.py rebuild_actions``."""

from __future__ import annotations


def actions_derive(*, admission_ids) -> dict:
    """Set the kind of the admissions' events by the action semantics (stub)."""
    return {}
