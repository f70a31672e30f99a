"""The Gold budget page of a Scale submission (admins): how many more
physician windows a target interval width would need (issue 33)."""

from __future__ import annotations

import math

from django import forms
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.access import admin_required
from accounts.web import found_or_404
from exports.scoring_budget import figure_choices, submission_budget_page


def _open_unit(width: float) -> None:
    if not (math.isfinite(width) and 0 < width < 1):
        raise forms.ValidationError(
            "The target width must be a number above 0 and below 1."
        )


class BudgetForm(forms.Form):
    figure = forms.ChoiceField(choices=figure_choices(None))
    width = forms.FloatField(
        validators=[_open_unit], help_text="Of the 95 % interval: above 0, below 1."
    )


@require_GET
@admin_required
def submission_budget(request, submission_id: int):
    form = BudgetForm(request.GET or None)
    valid = form.is_bound and form.is_valid()
    context = found_or_404(
        submission_budget_page(
            user=request.user,
            submission_id=submission_id,
            figure=form.cleaned_data["figure"] if valid else None,
            target_width=form.cleaned_data["width"] if valid else None,
        ),
        "No such submission.",
    )
    # The figures' names say the submission's k.
    form.fields["figure"].choices = figure_choices(context["submission"].k)
    return render(request, "exports/submission_budget.html", {**context, "form": form})
