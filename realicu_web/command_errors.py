"""How a management command reports a refusal: as a CommandError, one line of
the refusal's messages on stderr and exit status 1, never a traceback."""

from __future__ import annotations

from contextlib import contextmanager

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError


@contextmanager
def refusal_as_command_error():
    """A ValidationError the block raises (an importer's SourceDataError
    included) ends the command with its messages."""
    try:
        yield
    except ValidationError as exc:
        raise CommandError("; ".join(exc.messages)) from exc
