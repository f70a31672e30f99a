"""Pages for imported clinical data."""
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.views.decorators.http import require_GET


@require_GET
@login_required
def stay_list(request):
    return HttpResponse("stays")
