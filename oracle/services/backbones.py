"""Writes of Oracle backbones (spec section 7): create, update, and the checks
that keep an API key out of the database and a backbone's settings usable."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction

from oracle.backbones.openai_compat import _RESERVED as RESERVED_PARAMETERS
from oracle.models import Backbone, BackboneKind
from windows.accounts import require_admin

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


BACKBONE_FIELDS = (
    "name",
    "kind",
    "base_url",
    "model",
    "api_key_env",
    "parameters",
    "timeout_seconds",
    "max_retries",
    "concurrency",
    "requests_per_minute",
    "price_per_million_input",
    "price_per_million_output",
)


def _backbone_validate(backbone: Backbone) -> None:
    errors: dict[str, list[str]] = {}
    backbone.name = (backbone.name or "").strip()
    backbone.api_key_env = (backbone.api_key_env or "").strip()
    if backbone.api_key_env and not ENV_NAME.match(backbone.api_key_env):
        errors.setdefault("api_key_env", []).append(
            "Give the name of an environment variable (letters, digits, "
            "underscores), not the key itself."
        )
    if backbone.base_url and urlsplit(backbone.base_url).scheme not in ("http", "https"):
        errors.setdefault("base_url", []).append(
            "The base URL must start with http:// or https://."
        )
    if not isinstance(backbone.parameters, dict):
        errors.setdefault("parameters", []).append("Parameters must be a JSON object.")
    else:
        # The prompt, the model and the reply's shape are the Oracle's own: a
        # parameter cannot replace them (the backbone would otherwise drop it
        # without a word).
        reserved = sorted(set(backbone.parameters) & RESERVED_PARAMETERS)
        if reserved:
            errors.setdefault("parameters", []).append(
                f"{', '.join(reserved)} cannot be set here: the Oracle sets the "
                "model, the messages and the reply's form itself."
            )
    if backbone.kind == BackboneKind.RULES and (backbone.base_url or backbone.api_key_env):
        errors.setdefault("base_url", []).append(
            "A rules backbone calls no endpoint: leave the base URL and the API key "
            "variable empty."
        )
    if backbone.concurrency is not None and backbone.concurrency < 1:
        errors.setdefault("concurrency", []).append("At least one request in flight.")
    if backbone.requests_per_minute is not None and backbone.requests_per_minute < 1:
        errors.setdefault("requests_per_minute", []).append(
            "At least one request per minute."
        )
    if backbone.timeout_seconds is not None and not backbone.timeout_seconds > 0:
        errors.setdefault("timeout_seconds", []).append("The timeout must be positive.")
    for price in ("price_per_million_input", "price_per_million_output"):
        value = getattr(backbone, price)
        if value is not None and value < 0:
            errors.setdefault(price, []).append("A price cannot be negative.")
    try:
        backbone.full_clean(exclude=["created_by"])
    except ValidationError as error:
        for key, messages in error.message_dict.items():
            errors.setdefault(key, []).extend(messages)
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def backbone_create(*, admin, name: str, kind: str, **fields) -> Backbone:
    """A new backbone. The API key is never taken: ``api_key_env`` names the
    environment variable that holds it."""
    require_admin(admin, "configure Oracle backbones")
    unknown = set(fields) - set(BACKBONE_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown backbone settings: {', '.join(sorted(unknown))}.")
    backbone = Backbone(name=name, kind=kind, created_by=admin, **fields)
    if backbone.parameters is None:
        backbone.parameters = {}
    _backbone_validate(backbone)
    backbone.save()
    return backbone


@transaction.atomic
def backbone_update(*, admin, backbone: Backbone, **fields) -> Backbone:
    """Change a backbone's settings. Runs already made keep their snapshot."""
    require_admin(admin, "configure Oracle backbones")
    unknown = set(fields) - set(BACKBONE_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown backbone settings: {', '.join(sorted(unknown))}.")
    backbone = Backbone.objects.select_for_update().get(pk=backbone.pk)
    if "kind" in fields and fields["kind"] != backbone.kind and backbone.runs.exists():
        raise ValidationError(
            {"kind": "This backbone has runs: its kind cannot change. Make a new one."}
        )
    for key, value in fields.items():
        setattr(backbone, key, value)
    if backbone.parameters is None:
        backbone.parameters = {}
    _backbone_validate(backbone)
    backbone.save()
    return backbone
