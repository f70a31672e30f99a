"""The admin page of a stay's surveillance checkpoints: the decision at each
checkpoint over the trajectory and every active finding with its evidence."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.access import admin_required
from surveillance.checkpoints import FAMILIES, FINDINGS
from surveillance.selectors import stay_checkpoints_get
from windows.selectors import stay_get


@require_GET
@admin_required
def stay_checkpoints(request, stay_id: int):
    stay = stay_get(user=request.user, stay_id=stay_id)
    if stay is None:
        raise Http404("No such ICU stay.")
    points = stay_checkpoints_get(stay=stay)
    active = [{f.name: f for f in p.findings} for p in points]
    rows = [
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
    context = {"stay": stay, "points": points, "rows": rows}
    return render(request, "surveillance/stay_checkpoints.html", context)
