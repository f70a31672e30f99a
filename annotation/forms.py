"""Forms of the admin's campaign pages. They only parse what was posted; the
rules (a name, Gold windows, enough physicians) are checked by the services,
whose messages the pages show."""

from __future__ import annotations

from django import forms

from annotation import selectors


class CampaignForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)
    cohort = forms.ModelChoiceField(
        queryset=selectors.cohorts_all(),
        required=False,
        empty_label="All sampled Gold windows",
        help_text="The sampled Gold windows of the cohort's stays.",
    )
    physicians = forms.ModelMultipleChoiceField(
        queryset=selectors.physicians_all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    annotators_per_window = forms.IntegerField(min_value=1, max_value=20, initial=2)
