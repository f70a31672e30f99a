"""A backbone's token figures (issue 19): the room its context window leaves a
prompt, its reply budget, and the characters-per-token ratio its estimates use,
calibrated from the prompt tokens its server reports."""

from __future__ import annotations

import statistics

from django.conf import settings
from django.db import transaction

# Observations kept per backbone, the fewest that calibrate, and the quantile
# used: a low ratio (more tokens per character) keeps the estimate on the safe
# side for nine prompts in ten before the margin and the server's count.
CALIBRATION_KEEP = 200
CALIBRATION_MIN = 3
CALIBRATION_QUANTILE = 0.1
# Before that: English prose runs at about 4 characters per token, clinical
# text with numbers at 2.5-3 on small vocabularies (SmolLM2: 2.7), so an
# uncalibrated backbone starts on the safe side of both.
UNCALIBRATED_CHARS_PER_TOKEN = 3.0


def context_tokens(backbone) -> int:
    return int(
        backbone.context_tokens
        or getattr(settings, "REALICU_LLM_DEFAULT_CONTEXT_TOKENS", 4096)
    )


def completion_tokens(backbone) -> int:
    """max_tokens of every request: the backbone's, else the default, and never
    more than half its context window."""
    wanted = int(
        backbone.max_completion_tokens
        or getattr(settings, "REALICU_LLM_DEFAULT_COMPLETION_TOKENS", 768)
    )
    return max(16, min(wanted, context_tokens(backbone) // 2))


def prompt_budget(backbone, *, template=None) -> int:
    """The prompt tokens a request may use: the context window minus the reply
    budget minus REALICU_LLM_PROMPT_MARGIN_TOKENS. A template's budget can
    only lower it (to spend less), never raise it past the window."""
    return prompt_budget_parts(backbone, template=template)["budget"]


def prompt_budget_parts(backbone, *, template=None) -> dict:
    """The budget and the figures it is made of (the README's formula), for a
    page or an error message to show: ``window``, ``reply``, ``margin``, the
    template's ``template_budget`` (0 when it sets none) and ``budget``."""
    margin = int(getattr(settings, "REALICU_LLM_PROMPT_MARGIN_TOKENS", 64))
    window, reply = context_tokens(backbone), completion_tokens(backbone)
    room = window - reply - margin
    template_budget = int(getattr(template, "token_budget", 0) or 0)
    if template_budget:
        room = min(room, template_budget)
    return {
        "window": window,
        "reply": reply,
        "margin": margin,
        "template_budget": template_budget,
        "budget": max(1, room),
    }


def budget_text(parts: dict) -> str:
    """The budget as its formula, e.g. "3264 (context window 4096 - reply 768
    - margin 64)"."""
    text = (
        f"{parts['budget']} (context window {parts['window']} - reply "
        f"{parts['reply']} - margin {parts['margin']}"
    )
    if parts.get("template_budget") and parts["template_budget"] == parts["budget"]:
        text += f"; the template's budget {parts['template_budget']} is lower"
    return text + ")"


def estimate_error(labels) -> dict | None:
    """How far the prompts' token estimates were from the server's counts, over
    ``labels`` (an OracleLabel queryset) that have both: the median and the
    worst relative error in percent (negative: the estimate was under), and
    how many were under; None when no label has both."""
    pairs = [
        (estimate, real)
        for estimate, real in labels.filter(
            prompt_tokens__gt=0, prompt_estimate__gt=0
        ).values_list("prompt_estimate", "prompt_tokens")
    ]
    if not pairs:
        return None
    errors = sorted(100.0 * (estimate - real) / real for estimate, real in pairs)
    return {
        "count": len(errors),
        "median": round(statistics.median(errors), 1),
        "median_abs": round(statistics.median(abs(e) for e in errors), 1),
        "worst_under": round(min(errors[0], 0.0), 1),
        "worst_over": round(max(errors[-1], 0.0), 1),
        "under": sum(1 for e in errors if e < 0),
    }


def calibrated_chars_per_token(calibration: dict | None) -> float:
    """The safe quantile of the observed characters per token, or
    UNCALIBRATED_CHARS_PER_TOKEN until CALIBRATION_MIN prompts were observed."""
    ratios = [r for r in (calibration or {}).get("ratios", []) if r and r > 0]
    if len(ratios) < CALIBRATION_MIN:
        return UNCALIBRATED_CHARS_PER_TOKEN
    ratios = sorted(ratios)
    index = int(CALIBRATION_QUANTILE * (len(ratios) - 1))
    return round(ratios[index], 4)


def calibration_record(*, backbone_id: int, samples: list[tuple[int, int]]) -> dict:
    """Add (prompt characters, prompt tokens the server reported) pairs to the
    backbone's calibration; returns it. Pairs with no tokens are skipped."""
    from oracle.models import Backbone

    ratios = [chars / tokens for chars, tokens in samples if chars > 0 and tokens > 0]
    if not ratios:
        return {}
    with transaction.atomic():
        backbone = Backbone.objects.select_for_update().filter(pk=backbone_id).first()
        if backbone is None:
            return {}
        calibration = dict(backbone.calibration or {})
        kept = (list(calibration.get("ratios", [])) + ratios)[-CALIBRATION_KEEP:]
        calibration["ratios"] = [round(r, 4) for r in kept]
        calibration["chars_per_token"] = calibrated_chars_per_token(calibration)
        calibration["median"] = round(statistics.median(kept), 4)
        calibration["observed"] = int(calibration.get("observed", 0)) + len(ratios)
        backbone.calibration = calibration
        backbone.save(update_fields=["calibration"])
    return calibration


SPEEDS_KEEP = 50


def speed_record(*, backbone_id: int, speeds: list[float]) -> None:
    """Add reply tokens per second measured on the wire to the backbone's
    calibration; its ``tokens_per_second`` (their median) is where the next
    run's timeout starts (oracle.backbones.openai_compat.request_timeout)."""
    from oracle.models import Backbone

    speeds = [round(float(v), 3) for v in speeds if v and v > 0]
    if not speeds:
        return
    with transaction.atomic():
        backbone = Backbone.objects.select_for_update().filter(pk=backbone_id).first()
        if backbone is None:
            return
        calibration = dict(backbone.calibration or {})
        kept = (list(calibration.get("speeds", [])) + speeds)[-SPEEDS_KEEP:]
        calibration["speeds"] = kept
        calibration["tokens_per_second"] = round(statistics.median(kept), 3)
        backbone.calibration = calibration
        backbone.save(update_fields=["calibration"])


def context_learned(*, backbone_id: int, tokens: int) -> None:
    """A context window a server's error reported, kept when the admin left
    the backbone's empty."""
    from oracle.models import Backbone

    with transaction.atomic():
        backbone = Backbone.objects.select_for_update().filter(pk=backbone_id).first()
        if backbone is None or backbone.context_tokens:
            return
        backbone.context_tokens = int(tokens)
        report = dict(backbone.server_report or {})
        report["context_tokens_from"] = "the server's context-length error"
        backbone.server_report = report
        backbone.save(update_fields=["context_tokens", "server_report"])


def prompt_tokens_distribution(labels, *, window: int | None) -> dict | None:
    """Median, p95 and maximum of the real prompt tokens of ``labels`` (an
    OracleLabel queryset), and a 10-bin histogram from 0 to the context
    ``window`` (or the maximum, if larger), each bin with its count and its
    share of the windows; None when no label has a count."""
    values = sorted(v for v in labels.values_list("prompt_tokens", flat=True) if v)
    if not values:
        return None

    def quantile(q: float) -> int:
        return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]

    top = max(values[-1], int(window or 0), 1)
    width = max(1, -(-top // 10))
    counts = [0] * 10
    for value in values:
        counts[min(9, value // width)] += 1
    bins = [
        {
            "from": i * width,
            "to": (i + 1) * width,
            "count": n,
            "share": round(n / len(values), 3),
        }
        for i, n in enumerate(counts)
    ]
    return {
        "count": len(values),
        "median": quantile(0.5),
        "p95": quantile(0.95),
        "max": values[-1],
        "window": window,
        "over": sum(1 for v in values if window and v > window),
        "bins": bins,
    }
