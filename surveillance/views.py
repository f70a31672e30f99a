"""The admin page of a stay's surveillance checkpoints: the decision at each
checkpoint over the trajectory and every active finding with its evidence.
Until a worker has computed them for the stay's present trajectory, the page
says so and polls for them (htmx: the ``checkpoints`` partial)."""

from __future__ import annotations

from django.views.decorators.http import require_GET

from accounts.access import admin_required
from accounts.web import found_or_404, render_page_or_partial
from surveillance.checkpoints import FAMILIES, FINDINGS
from surveillance.services import stay_checkpoints_request
from windows.selectors import stay_get


def _rows(points) -> list[dict]:
    """Each family's findings, each with its cell at every checkpoint."""
    active = [{f.name: f for f in p.findings} for p in points]
    return [
        {
            "family": family,
            "findings": [
                {
                    "name": spec.name,
                    "level": spec.level,
                    "temporal": spec.temporal,
                    "definition": " ".join((spec.rule.__doc__ or "").split()),
                    "cells": [found.get(spec.name) for found in active],
                }
                for spec in FINDINGS
                if spec.family == family
            ],
        }
        for family in FAMILIES
    ]


@require_GET
@admin_required
def stay_checkpoints(request, stay_id: int):
    stay = found_or_404(
        stay_get(user=request.user, stay_id=stay_id), "No such ICU stay."
    )
    found = stay_checkpoints_request(stay=stay)
    points = found["points"]
    context = {
        "stay": stay,
        "points": points or [],
        "computed": points is not None,
        "queued_at": found["queued_at"],
        "slow": found["slow"],
        "rows": _rows(points) if points is not None else [],
    }
    response = render_page_or_partial(
        request, "surveillance/stay_checkpoints.html", context, partial="checkpoints"
    )
    if points is None:
        response["Cache-Control"] = "no-store"
    return response
