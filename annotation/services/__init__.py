"""Writes of the annotation app: campaigns and their assignments
(``campaigns``), and physicians' labels (``labels``). Callers import the
services from here."""

from annotation.services.campaigns import (
    assignment_add,
    assignment_reassign,
    campaign_create,
    campaign_critical_categories_set,
    campaign_window_adjudication_start,
)
from annotation.services.labels import (
    ACTIVE_SECONDS_SLACK,
    MAX_ACTIVE_SECONDS_PER_SAVE,
    MAX_EVIDENCE_PER_ITEM,
    MAX_ITEM_CHARS,
    MAX_ITEMS_PER_LIST,
    TEXT_LISTS,
    label_reopen,
    label_save_draft,
    label_submit,
)

__all__ = [
    "MAX_ITEM_CHARS",
    "assignment_add",
    "assignment_reassign",
    "campaign_create",
    "campaign_critical_categories_set",
    "campaign_window_adjudication_start",
    "label_reopen",
    "label_save_draft",
    "label_submit",
]
