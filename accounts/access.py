"""The one access policy of the pages.

- **A wrong role is a 403** with a sentence naming who may open the page:
  ``role_required`` and the decorators built with it (``physician_required``,
  ``admin_required``, ``judge_required``, ``clinical_data_required``; exports
  builds ``release_user_required`` on it). Anonymous users are sent to sign in.
- **An object outside the user's scope is a 404**: selectors fetch every object a
  user can steer through a query scoped to that user (for instance
  ``annotation.selectors.assignment_get_for_physician``) and raise ``Http404``
  when it is not there, so a forged id cannot tell "not yours" from "none".
- **Blindness** (who may see whose labels, and when) is a set of named rules in
  ``annotation.blindness`` that the selectors call; no view decides it.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from accounts.roles import user_is_admin, user_is_physician, user_may_see_clinical_data


def role_required(check, *, message: str):
    """Signed in (else to the sign-in page) and ``check(user)`` true (else a
    403 page that says ``message``)."""

    def decorator(view):
        @wraps(view)
        @login_required
        def wrapper(request, *args, **kwargs):
            if not check(request.user):
                raise PermissionDenied(message)
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


physician_required = role_required(
    user_is_physician, message="Only physicians label windows."
)
admin_required = role_required(
    user_is_admin, message="This page is for admins (adjudicators) only."
)
judge_required = role_required(
    lambda user: user_is_physician(user) or user_is_admin(user),
    message="Calibration is for physicians and admins only.",
)
clinical_data_required = role_required(
    user_may_see_clinical_data,
    message=(
        "Stays and events are open to physicians and admins only. "
        "Researchers reach the benchmark through its releases."
    ),
)
