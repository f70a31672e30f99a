"""The annotation app's models, by concern: campaigns, assignments, labels and
their append-only history (``campaigns``); agreement, consensus and
adjudication (``consensus``); threshold calibration (``calibration``)."""

from annotation.models.calibration import (
    CalibrationDraw,
    CalibrationInvitation,
    CalibrationJudgment,
    CalibrationPair,
    CalibrationSet,
    CalibrationStratum,
    TauAdoption,
)
from annotation.models.campaigns import (
    ActionRating,
    Assignment,
    AssignmentState,
    Campaign,
    CampaignKind,
    CampaignPhysician,
    CampaignWindow,
    Label,
    LabelRevision,
    PatientStatus,
    RevisionKind,
)
from annotation.models.consensus import (
    AdjudicationAction,
    AdjudicationDecision,
    AgreementRecompute,
    ConsensusLabel,
    ConsensusStatusSource,
    ConsensusTask,
    WindowAgreement,
)
from annotation.models.jobs import AdminJob, RecomputeState

__all__ = [
    "AdminJob",
    "ActionRating",
    "AdjudicationAction",
    "AdjudicationDecision",
    "AgreementRecompute",
    "Assignment",
    "AssignmentState",
    "CalibrationDraw",
    "CalibrationInvitation",
    "CalibrationJudgment",
    "CalibrationPair",
    "CalibrationSet",
    "CalibrationStratum",
    "Campaign",
    "CampaignKind",
    "CampaignPhysician",
    "CampaignWindow",
    "ConsensusLabel",
    "ConsensusStatusSource",
    "ConsensusTask",
    "Label",
    "LabelRevision",
    "PatientStatus",
    "RecomputeState",
    "RevisionKind",
    "TauAdoption",
    "WindowAgreement",
]
