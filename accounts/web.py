"""Web helpers every app's views share (no view imports another app's views)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TypeVar

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

T = TypeVar("T")


def found_or_404(found: T | None, message: str) -> T:
    """What a view looked up (a selector's row or page, a parsed id, a file),
    or Http404 with ``message`` when the lookup found nothing (None): an
    object the user may not see is not found."""
    if found is None:
        raise Http404(message)
    return found


def wants_partial(request) -> bool:
    """An htmx request swaps a fragment; a history restore asks for the whole
    page (htmx had no snapshot of it)."""
    return (
        bool(getattr(request, "htmx", False))
        and not request.htmx.history_restore_request
    )


def render_page_or_partial(
    request, template: str, context: dict, *, partial: str, status: int = 200
):
    """The whole page, or only ``template#partial`` for an htmx request; the
    response varies on HX-Request, since one URL answers with either."""
    name = f"{template}#{partial}" if wants_partial(request) else template
    response = render(request, name, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


def error_text(error) -> str:
    """A ValidationError's or PermissionDenied's message(s) as one sentence."""
    return " ".join(getattr(error, "messages", None) or [str(error)])


@contextmanager
def refusal_shown(request):
    """Run a page's post: a refusal the block raises (ValidationError,
    PermissionDenied) ends the block and is shown to the user as an error
    message, so the view goes on to its redirect either way."""
    try:
        yield
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, error_text(error))


@contextmanager
def refusal_on_form(form):
    """Run a form page's post: a refusal the block raises (ValidationError,
    PermissionDenied) ends the block and goes onto the form, a field's errors
    beside that field and the rest above the form, so the view goes on to show
    the form again."""
    try:
        yield
    except (ValidationError, PermissionDenied) as error:
        if hasattr(error, "error_dict"):
            for key, messages_ in error.message_dict.items():
                form.add_error(key if key in form.fields else None, messages_)
        else:
            form.add_error(None, error_text(error))
