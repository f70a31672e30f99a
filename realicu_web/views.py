"""The site's landing redirect: each role starts where its work is."""

from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from accounts.roles import user_is_admin, user_is_physician, user_may_see_clinical_data


@require_GET
def home(request):
    """Sign-in lands here (LOGIN_REDIRECT_URL) when no ``next`` is given. A
    physician starts at the queue of windows to label; an admin (also one who
    labels) where adjudication and the stays are reached; a researcher at the
    releases. Anonymous visitors sign in first, with no ``next``: they then
    come back here and land by role (through the stays page, its ``next``
    would take a physician to the stays)."""
    user = request.user
    if not user.is_authenticated:
        return redirect("login")
    if user_is_physician(user) and not user_is_admin(user):
        return redirect("annotation:queue")
    if user.is_authenticated and not user_may_see_clinical_data(user):
        return redirect("exports:release_list")
    return redirect("windows:stay_list")
