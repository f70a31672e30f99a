"""The user a management command records its work under, the row an option
names by id, and a service's refusal as the command's error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import CommandError
from django.db.models import Model, QuerySet


def command_user(username: str | None, *, option: str, recorded: str):
    """The active user ``username``, or the first superuser when none is
    named; a CommandError saying what to do otherwise. ``option`` is the
    command's option that names the user, ``recorded`` what is recorded under
    them ("the run")."""
    users = get_user_model().objects.filter(is_active=True)
    user = (
        users.filter(username=username).first()
        if username
        else users.filter(is_superuser=True).order_by("pk").first()
    )
    if user is None:
        raise CommandError(
            f"No active user {username!r}."
            if username
            else f"No superuser to record {recorded} under: create one "
            f"(manage.py createsuperuser) or pass {option}."
        )
    return user


def command_row(rows: type[Model] | QuerySet, pk: int, noun: str):
    """The row with id ``pk`` among ``rows`` (a model, or a queryset that
    narrows or prefetches), or the CommandError "No ``noun`` with id ``pk``."."""
    queryset = rows if isinstance(rows, QuerySet) else rows._default_manager.all()
    row = queryset.filter(pk=pk).first()
    if row is None:
        raise CommandError(f"No {noun} with id {pk}.")
    return row


@contextmanager
def service_refusals() -> Iterator[None]:
    """A ValidationError or PermissionDenied raised in the block (a service
    refusing) becomes the CommandError with its messages."""
    try:
        yield
    except (ValidationError, PermissionDenied) as error:
        raise CommandError(
            "; ".join(getattr(error, "messages", [str(error)]))
        ) from error
