"""The REST API's exception handler: a service's ``ValidationError`` is a 400 and
its ``PermissionDenied`` a 403, each with the service's message."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.views import exception_handler


def api_exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            exc = exceptions.ValidationError(exc.message_dict)
        else:
            exc = exceptions.ValidationError({"detail": exc.messages})
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    return exception_handler(exc, context)
