"""Forms of the Oracle pages. They only parse what was posted; the rules are
checked by oracle.services, whose messages the pages show."""

from __future__ import annotations

import json

from django import forms

from accounts.ids import MAX_INT32, IdChoiceField, IdMultipleChoiceField
from annotation import selectors as annotation_selectors
from annotation.models import Campaign
from oracle.models import (
    Backbone,
    BackboneKind,
    OracleRun,
    PromptTemplate,
    ReplyFormat,
    Tokenizer,
)
from realicu_web.jsonlimits import JsonLimitError, loads_bounded
from windows.models import Cohort


class BackboneForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=BackboneKind.choices)
    base_url = forms.CharField(
        max_length=200,
        required=False,
        label="Base URL",
        help_text="e.g. http://127.0.0.1:8000/v1 (OpenAI-compatible only).",
    )
    model = forms.CharField(max_length=200, required=False)
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="API key variable",
        help_text="The name of the environment variable of the workers that holds "
        "the key, e.g. REALICU_LLM_KEY (names the operator allows: "
        "REALICU_LLM_KEY_ENV_PREFIXES, REALICU_LLM_KEY_ENV_NAMES). The key itself "
        "is never entered here.",
    )
    parameters = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='Sampling parameters as a JSON object, e.g. {"temperature": 0}.',
    )
    timeout_seconds = forms.FloatField(initial=120.0, label="Timeout (s)")
    max_retries = forms.IntegerField(initial=5, min_value=0, max_value=20)
    concurrency = forms.IntegerField(
        initial=16, label="Requests in flight", help_text="Per run, across workers."
    )
    requests_per_minute = forms.IntegerField(
        initial=600, help_text="Per run, across workers."
    )
    context_tokens = forms.IntegerField(
        required=False,
        min_value=1,
        label="Context window (tokens)",
        help_text="As the server runs the model (e.g. Ollama's num_ctx, llama.cpp's "
        "--n_ctx). Empty: detected from the server, else the platform default.",
    )
    max_completion_tokens = forms.IntegerField(
        required=False,
        min_value=1,
        label="Reply tokens (max_tokens)",
        help_text="Empty: the platform default. The prompt gets the window minus "
        "this minus a margin.",
    )
    reply_format = forms.ChoiceField(
        choices=ReplyFormat.choices,
        initial=ReplyFormat.JSON_OBJECT,
        required=False,
        label="Constrained reply",
        help_text="How the label's JSON Schema is sent; detected with the server.",
    )
    tokenizer = forms.ChoiceField(
        choices=Tokenizer.choices,
        required=False,
        label="Token counts",
    )
    detect = forms.BooleanField(
        required=False,
        initial=True,
        label="Ask the server",
        help_text="Fill the context window, token counts and reply format from "
        "what the server reports (vLLM, llama.cpp, llama-cpp-python, Ollama).",
    )
    price_per_million_input = forms.FloatField(
        initial=0.0, label="Price / 1M input tokens"
    )
    price_per_million_output = forms.FloatField(
        initial=0.0, label="Price / 1M output tokens"
    )

    @classmethod
    def for_backbone(cls, backbone: Backbone, data=None):
        initial = {
            name: getattr(backbone, name)
            for name in cls.base_fields
            if name != "detect"
        }
        initial["parameters"] = json.dumps(backbone.parameters or {})
        initial["detect"] = False
        return cls(data, initial=initial)

    def clean_base_url(self):
        """Only whether the URL can be read (an unclosed IPv6 bracket, a port
        out of range); where it may point is the service's check."""
        from oracle.backbones.endpoints import EndpointRefused, url_parse

        url = (self.cleaned_data.get("base_url") or "").strip()
        if url:
            try:
                url_parse(url)
            except EndpointRefused as error:
                raise forms.ValidationError(str(error)) from None
        return url

    def clean_parameters(self):
        text = (self.cleaned_data.get("parameters") or "").strip()
        if not text:
            return {}
        try:
            value = loads_bounded(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not valid JSON: {error.msg}.") from error
        except JsonLimitError as error:  # nested thousands deep, a giant integer
            raise forms.ValidationError(f"Refused: {error}.") from error
        if not isinstance(value, dict):
            raise forms.ValidationError("Parameters must be a JSON object.")
        return value


class RunForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)
    backbone = forms.ModelChoiceField(queryset=Backbone.objects.all(), empty_label=None)
    prompt = forms.ModelChoiceField(
        queryset=PromptTemplate.objects.all(),
        required=False,
        empty_label="The default prompt",
        label="Prompt version",
    )
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.all(),
        required=False,
        empty_label="—",
        help_text="Label the campaign's windows (the Gold windows, for validation).",
    )
    cohort = forms.ModelChoiceField(
        queryset=Cohort.objects.all(),
        required=False,
        empty_label="—",
        help_text="Or label every candidate window of the cohort's stays (Scale).",
    )


class ValidateForm(forms.Form):
    campaign = forms.ModelChoiceField(queryset=Campaign.objects.all(), empty_label=None)


class GoldDrawForm(forms.Form):
    """An active Gold draw (oracle.services.gold_draw): the runs whose
    disagreement is the uncertainty, the budget and who labels."""

    name = forms.CharField(max_length=200)
    run = IdChoiceField(
        queryset=OracleRun.objects.order_by("-pk"),
        empty_label=None,
        label="Oracle run",
        help_text="The run whose labels the Gold set will check.",
    )
    other_runs = IdMultipleChoiceField(
        queryset=OracleRun.objects.order_by("-pk"),
        widget=forms.CheckboxSelectMultiple,
        label="Other readings",
        help_text="Runs of the same windows whose disagreement with the first run "
        "is the uncertainty: windows where they disagree are drawn more likely. "
        "Choose two or more that err apart from it (another backbone, a rerun "
        "that samples, the rules): on the coverage bench two saved 31-35 % of "
        "the Gold windows a uniform draw needs for the same interval width, one "
        "saved 21-27 %. A rerun at temperature 0 repeats the first and says little.",
    )
    budget = forms.IntegerField(
        min_value=1,
        max_value=MAX_INT32,
        label="Gold windows",
        help_text="How many new windows physicians label, in expectation. They "
        "top the labels so far up where the Oracle is unsure; windows labelled "
        "before are not labelled again.",
    )
    physicians = IdMultipleChoiceField(
        queryset=annotation_selectors.physicians_all(),
        widget=forms.CheckboxSelectMultiple,
    )
    annotators_per_window = forms.IntegerField(min_value=1, max_value=20, initial=2)
    floor = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Uniform floor",
        help_text="The share of the budget spread evenly, so that every window "
        "can be drawn. Empty: 0.2 once 20 windows have labels, 0.7 before.",
    )
    seed = forms.IntegerField(
        min_value=-MAX_INT32 - 1,
        max_value=MAX_INT32,
        initial=0,
        help_text="The same runs, labels, budget and seed draw the same windows.",
    )
