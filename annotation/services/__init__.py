"""Writes of the annotation app, by concern: campaigns and their assignments
(``campaigns``), physicians' labels (``labels``), the agreement of a window or
a campaign and its hooks on submit and reopen (``agreement``), the consensus
built from it (``consensus``) and admins' adjudication (``adjudication``).
Callers import the services from here; the campaign-wide recompute job from
``recompute``."""

from annotation.services.adjudication import adjudication_decide
from annotation.services.agreement import (
    campaign_agreement_refresh,
    window_agreement_compute,
    window_consensus_refresh,
)
from annotation.services.campaigns import (
    assignment_add,
    assignment_reassign,
    campaign_create,
    campaign_create_from_cohort,
    campaign_critical_categories_set,
    campaign_window_adjudication_start,
)
from annotation.services.consensus import consensus_build
from annotation.services.labels import (
    MAX_ACTIVE_SECONDS_PER_SAVE,
    label_reopen,
    label_save_draft,
    label_submit,
)

__all__ = [
    "MAX_ACTIVE_SECONDS_PER_SAVE",
    "adjudication_decide",
    "assignment_add",
    "assignment_reassign",
    "campaign_agreement_refresh",
    "campaign_create",
    "campaign_create_from_cohort",
    "campaign_critical_categories_set",
    "campaign_window_adjudication_start",
    "consensus_build",
    "label_reopen",
    "label_save_draft",
    "label_submit",
    "window_agreement_compute",
    "window_consensus_refresh",
]
