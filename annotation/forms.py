"""Forms of the admin's campaign pages. They only parse what was posted; the
rules (a name, Gold windows, enough physicians, counts the windows can meet)
are checked by the services, whose messages the pages show."""

from __future__ import annotations

from django import forms

from accounts.ids import MAX_INT32, IdChoiceField, IdMultipleChoiceField
from annotation import selectors


class CohortChoiceField(IdChoiceField):
    def label_from_instance(self, obj) -> str:
        windows, stays = obj.gold_windows, obj.gold_stays
        return (
            f"{obj.name}: {windows:,} Gold window{'s' if windows != 1 else ''} in "
            f"{stays:,} stay{'s' if stays != 1 else ''}"
        )


class CampaignForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)
    cohort = CohortChoiceField(
        queryset=selectors.cohorts_all(),
        required=False,
        empty_label="All sampled Gold windows",
        help_text="The sampled Gold windows of the cohort's stays.",
    )
    physicians = IdMultipleChoiceField(
        queryset=selectors.physicians_all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    annotators_per_window = forms.IntegerField(min_value=1, max_value=20, initial=2)
    window_count = forms.IntegerField(
        min_value=1,
        max_value=MAX_INT32,
        required=False,
        help_text="Drawn from the chosen Gold windows, spread evenly over the "
        "stays. Empty: every window.",
    )
    stay_count = forms.IntegerField(
        min_value=1,
        max_value=MAX_INT32,
        required=False,
        help_text="Stays drawn first; the windows come from them. Empty: every stay.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=-MAX_INT32 - 1,
        max_value=MAX_INT32,
        initial=0,
        help_text="The same windows, counts and seed draw the same windows.",
    )
    evidence_required = forms.BooleanField(
        required=False,
        initial=True,
        help_text="Each acute problem, added action and red flag must cite at "
        "least one event before a label can be submitted.",
    )

    def clean_seed(self) -> int:
        seed = self.cleaned_data.get("seed")
        return 0 if seed is None else seed
