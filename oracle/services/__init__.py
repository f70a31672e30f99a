"""Writes of the Oracle (spec section 7): backbones (``backbones``), Oracle runs
(``runs``) and their chunked execution on workers (``chunks``), and validation
against Gold consensus (``validating``). Callers import the services from here."""

from oracle.services.backbones import (
    BACKBONE_FIELDS,
    ENV_NAME,
    backbone_create,
    backbone_update,
)
from oracle.services.chunks import (
    ChunkOutcome,
    ChunkResult,
    oracle_run_execute_chunk,
    oracle_run_execute_inline,
)
from oracle.services.gold_draw import gold_campaign_draw_active
from oracle.services.runs import (
    CHUNK_TASK,
    FINISHED_STATES,
    MAX_NAME,
    POLL_SECONDS,
    WAIT_SECONDS,
    chunk_size_default,
    lease_seconds,
    oracle_run_cancel,
    oracle_run_create,
    oracle_run_fail,
    oracle_run_requeue,
    oracle_run_resume,
    oracle_run_retry_failed,
    run_lanes,
)
from oracle.services.validating import (
    VALIDATION_ACTIVE,
    VALIDATION_TASK,
    validation_job_create,
    validation_job_execute,
    validation_report_create,
)

__all__ = [
    "BACKBONE_FIELDS",
    "ENV_NAME",
    "FINISHED_STATES",
    "MAX_NAME",
    "POLL_SECONDS",
    "CHUNK_TASK",
    "VALIDATION_ACTIVE",
    "VALIDATION_TASK",
    "WAIT_SECONDS",
    "ChunkOutcome",
    "ChunkResult",
    "backbone_create",
    "backbone_update",
    "chunk_size_default",
    "gold_campaign_draw_active",
    "lease_seconds",
    "oracle_run_cancel",
    "oracle_run_create",
    "oracle_run_execute_chunk",
    "oracle_run_execute_inline",
    "oracle_run_fail",
    "oracle_run_resume",
    "oracle_run_requeue",
    "oracle_run_retry_failed",
    "run_lanes",
    "validation_job_create",
    "validation_job_execute",
    "validation_report_create",
]
