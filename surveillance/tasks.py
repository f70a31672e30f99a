"""Celery tasks of the surveillance companion: thin wrappers around its reads."""

from celery import shared_task


@shared_task(acks_late=True)
def stay_checkpoints_task(stay_id: int) -> None:
    """Compute the stay's checkpoints into the cache, where its page reads
    them (surveillance.selectors.stay_checkpoints_get). Idempotent: a rerun
    finds them kept and computes nothing; a stay gone since is left alone."""
    from surveillance.selectors import stay_checkpoints_get
    from windows.models import Stay

    stay = Stay.objects.filter(pk=stay_id).first()
    if stay is not None:
        stay_checkpoints_get(stay=stay)
