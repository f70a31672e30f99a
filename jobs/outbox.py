"""The outbox: work that must follow a commit is recorded in the same
transaction and sent to the broker after it commits (jobs.models.OutboxMessage).

``outbox_send`` is what services call instead of ``task.delay``. When the broker
cannot be reached, the message stays in the table and the reaper
(``outbox_dispatch_due``, every ``REALICU_JOB_REAP_SECONDS`` on beat) sends it
once the broker is back.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from jobs.models import OutboxMessage

logger = logging.getLogger(__name__)


def _send(message: OutboxMessage) -> bool:
    """Publish one message; True once the broker has it (the row is deleted)."""
    from realicu_web.celery import app

    try:
        app.send_task(message.task, args=list(message.args or []))
    except Exception as error:  # the broker is down or unreachable
        OutboxMessage.objects.filter(pk=message.pk).update(
            attempts=message.attempts + 1,
            last_error=f"{type(error).__name__}: {error}"[:2000],
        )
        logger.warning(
            "outbox: %s not sent yet (%s); the reaper will retry", message, error
        )
        return False
    OutboxMessage.objects.filter(pk=message.pk).delete()
    return True


def outbox_send(
    *, task: str, args: list | tuple = (), key: str = ""
) -> OutboxMessage | None:
    """Record ``task(*args)`` to be sent once the current transaction commits
    (at once outside one). With ``key``, a message of that key still waiting is
    enough: none is added. Returns the waiting message."""
    if key:
        waiting = OutboxMessage.objects.filter(key=key).first()
        if waiting is not None:
            return waiting
    message = OutboxMessage.objects.create(task=task, args=list(args), key=key)
    transaction.on_commit(lambda: _send(message))
    return message


def outbox_dispatch_due(*, older_than_seconds: float = 2.0, limit: int = 1000) -> dict:
    """Send the messages whose first sending failed (or whose process died
    between commit and send). Returns counts for the log and the tests."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    sent = failed = 0
    for message in OutboxMessage.objects.filter(created_at__lte=cutoff)[:limit]:
        if _send(message):
            sent += 1
        else:
            failed += 1
            break  # the broker is still away: try again on the next round
    return {"sent": sent, "failed": failed}
