"""The kinds of job the reaper watches. Each app registers its job models in
its ``AppConfig.ready`` (the ground floor knows no app above it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.apps import apps


@dataclass(frozen=True)
class JobKind:
    """How the reaper treats one job model.

    ``queued``: the state of a job waiting for a worker; ``running``: the state
    of a job a worker holds (heart-beating); ``failed``: where a job goes whose
    workers kept dying (``max_attempts``). ``states``, the model's choices
    class, gives the three from its ``QUEUED``, ``RUNNING`` and ``FAILED``
    members; a state named otherwise is passed on its own and wins
    (``running=ReleaseState.BUILDING``). ``task`` is the Celery task that
    takes ``(pk,)`` and resumes the job where it stopped. ``requeue`` replaces
    the default re-queue (state back to ``queued``, task through the outbox);
    ``cleanup`` runs when the job is failed or re-queued (a build's partial
    folder). ``stalled`` may select more rows that have lost their workers
    (an Oracle run whose chunks all stopped)."""

    name: str
    model: str
    task: str
    states: type | None = None
    queued: str = ""
    running: str = ""
    failed: str = ""
    state_field: str = "state"
    error_field: str = "error"
    finished_field: str | None = "finished_at"
    created_field: str = "created_at"
    max_attempts: int = 3
    requeue: Callable | None = None
    cleanup: Callable | None = None

    def __post_init__(self) -> None:
        for field in ("queued", "running", "failed"):
            if not getattr(self, field) and self.states is not None:
                member = getattr(self.states, field.upper(), "")
                object.__setattr__(self, field, member)
            if not getattr(self, field):
                raise TypeError(f"job kind {self.name!r} has no {field} state")

    @property
    def model_class(self):
        return apps.get_model(self.model)

    def failure(self, message: str, label: str, now) -> dict:
        """The fields of a job of this kind that failed: its failed state, the
        reason, the progress label and, where the kind keeps one, when."""
        fields = {
            self.state_field: self.failed,
            self.error_field: message[:5000],
            "progress_label": label,
        }
        if self.finished_field:
            fields[self.finished_field] = now
        return fields

    def resumed(self, by: str, now) -> dict:
        """The fields of a job of this kind that an admin queues again: a fresh
        start, so no lease, no error, no end, and the count of workers lost on
        it starts over."""
        fields = {
            self.state_field: self.queued,
            "lease": "",
            "attempts": 0,
            self.error_field: "",
            "heartbeat_at": now,
            "progress_label": f"resumed by {by}"[:255],
        }
        if self.finished_field:
            fields[self.finished_field] = None
        return fields


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> None:
    _KINDS[kind.name] = kind


def kinds() -> list[JobKind]:
    return list(_KINDS.values())


def kind_for(model_or_row) -> JobKind | None:
    model = model_or_row if isinstance(model_or_row, type) else type(model_or_row)
    label = model._meta.label
    for kind in _KINDS.values():
        if kind.model == label:
            return kind
    return None
