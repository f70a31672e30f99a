"""Oracle backbones behind one interface (oracle.backbones.base.Backbone):
``backbone_for`` turns an admin's configured backbone into one that labels."""

from __future__ import annotations

from oracle.backbones.base import Backbone, BackboneResult, WindowContext


def backbone_for(backbone, *, template) -> Backbone:
    """The labeller for an oracle.models.Backbone row and a PromptTemplate.

    Rules backbones ignore the template. For OpenAI-compatible ones,
    ``parameters`` go into every request body as given, except ``"json_mode":
    true`` (the older switch for ``reply_format`` json_object when the row says
    none); the prompt's budget is the room the backbone's context window leaves
    (oracle.services.tokens.prompt_budget), estimated at its calibrated
    characters per token; the key is read from the environment variable the
    row names, when labelling starts, never from the database.
    """
    from django.conf import settings

    from oracle.models import BackboneKind

    if backbone.kind == BackboneKind.RULES:
        from oracle.backbones.rules import RulesBackbone

        return RulesBackbone()
    if backbone.kind == BackboneKind.OPENAI:
        from oracle.backbones.openai_compat import OpenAICompatBackbone
        from oracle.services.tokens import (
            budget_text,
            calibrated_chars_per_token,
            completion_tokens,
            prompt_budget_parts,
        )

        parts = prompt_budget_parts(backbone, template=template)
        parameters = dict(backbone.parameters or {})
        json_mode = bool(parameters.pop("json_mode", False))
        reply_format = backbone.reply_format or ""
        if json_mode and reply_format in ("", "none"):
            reply_format = "json_object"
        return OpenAICompatBackbone(
            base_url=backbone.base_url,
            model=backbone.model,
            template=template,
            api_key_env=backbone.api_key_env,
            parameters=parameters,
            timeout_seconds=backbone.timeout_seconds,
            max_retries=backbone.max_retries,
            concurrency=backbone.concurrency,
            requests_per_minute=backbone.requests_per_minute,
            json_mode=json_mode,
            reply_format=reply_format or "none",
            max_completion_tokens=completion_tokens(backbone),
            prompt_budget=parts["budget"],
            budget_formula=budget_text(parts),
            chars_per_token=calibrated_chars_per_token(backbone.calibration),
            tokenizer=backbone.tokenizer,
            tokens_per_second=(backbone.calibration or {}).get("tokens_per_second"),
            timeout_max_seconds=float(
                getattr(settings, "REALICU_LLM_TIMEOUT_MAX_SECONDS", 1800)
            ),
        )
    raise ValueError(f"Unknown backbone kind {backbone.kind!r}.")


__all__ = ["Backbone", "BackboneResult", "WindowContext", "backbone_for"]
