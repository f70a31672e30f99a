"""The site's landing redirect: each role starts where its work is."""

from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from accounts.roles import user_may_see_clinical_data


@require_GET
def home(request):
    if request.user.is_authenticated and not user_may_see_clinical_data(request.user):
        return redirect("exports:release_list")
    return redirect("windows:stay_list")
