"""Writes of Oracle backbones (spec section 7): create, update, detect what
the server reports (context window, tokenizer, reply dialect), and the checks
that keep an API key out of the database, its variable among those the operator
allows, the URL off metadata and the app itself, and the settings usable."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.roles import require_admin
from oracle.backbones import http
from oracle.backbones.endpoints import EndpointRefused, key_env_check, url_check
from oracle.backbones.openai_compat import _RESERVED as RESERVED_PARAMETERS
from oracle.models import Backbone, BackboneKind, ReplyFormat, Tokenizer

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
    "context_tokens",
    "max_completion_tokens",
    "reply_format",
    "tokenizer",
    "price_per_million_input",
    "price_per_million_output",
)


def _backbone_validate(backbone: Backbone, *, app_host: str = "") -> None:
    errors: dict[str, list[str]] = {}
    backbone.name = (backbone.name or "").strip()
    backbone.api_key_env = (backbone.api_key_env or "").strip()
    if backbone.api_key_env and not ENV_NAME.match(backbone.api_key_env):
        errors.setdefault("api_key_env", []).append(
            "Give the name of an environment variable (letters, digits, "
            "underscores), not the key itself."
        )
    elif backbone.api_key_env:
        try:
            key_env_check(backbone.api_key_env)
        except EndpointRefused as error:
            errors.setdefault("api_key_env", []).append(str(error))
    try:
        scheme = urlsplit(backbone.base_url or "").scheme
    except ValueError:  # an unclosed IPv6 bracket: url_check says so
        scheme = "http"
    if backbone.base_url and scheme not in ("http", "https"):
        errors.setdefault("base_url", []).append(
            "The base URL must start with http:// or https://."
        )
    elif backbone.base_url:
        try:
            url_check(backbone.base_url, app_host=app_host)
        except EndpointRefused as error:
            errors.setdefault("base_url", []).append(str(error))
    if backbone.context_tokens is not None and backbone.context_tokens < 256:
        errors.setdefault("context_tokens", []).append(
            "A context window under 256 tokens cannot hold a window's prompt."
        )
    if (
        backbone.max_completion_tokens is not None
        and backbone.max_completion_tokens < 16
    ):
        errors.setdefault("max_completion_tokens", []).append(
            "Give a reply at least 16 tokens."
        )
    if (
        backbone.context_tokens
        and backbone.max_completion_tokens
        and backbone.max_completion_tokens > backbone.context_tokens // 2
    ):
        errors.setdefault("max_completion_tokens", []).append(
            f"At most half the context window ({backbone.context_tokens // 2}): the "
            "prompt needs the rest."
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
    if backbone.kind == BackboneKind.RULES and (
        backbone.base_url or backbone.api_key_env
    ):
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
            if key == "base_url" and errors.get(key):
                # The model checks the URL as above, without the request's
                # Host: the sentence above says it already.
                continue
            errors.setdefault(key, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def _fields_clean(fields: dict) -> dict:
    fields = dict(fields)
    for key in ("reply_format", "tokenizer"):
        if key in fields and not fields[key]:
            fields[key] = "" if key == "tokenizer" else ReplyFormat.JSON_OBJECT
    return fields


def _unknown_refuse(fields: dict) -> None:
    unknown = set(fields) - set(BACKBONE_FIELDS)
    if unknown:
        raise ValidationError(
            f"Unknown backbone settings: {', '.join(sorted(unknown))}."
        )


def _settings_complete(
    backbone: Backbone, *, app_host: str, detect: bool, overwrite: bool
) -> None:
    """The backbone's settings checked (``_backbone_validate``) and, with
    ``detect``, what its server reports applied (over what is set, with
    ``overwrite``); before any transaction."""
    if backbone.parameters is None:
        backbone.parameters = {}
    _backbone_validate(backbone, app_host=app_host)
    if detect and backbone.kind == BackboneKind.OPENAI:
        _detected_apply(backbone, server_detect(backbone), overwrite=overwrite)


def backbone_create(
    *, admin, name: str, kind: str, app_host: str = "", detect: bool = False, **fields
) -> Backbone:
    """A new backbone. The API key is never taken: ``api_key_env`` names the
    environment variable that holds it, one the operator allows. ``app_host``
    is the Host the admin's request came to (refused as a URL); with
    ``detect``, what the server reports fills the settings left empty.

    The URL's check (a name lookup) and the detection (requests to the
    server, seconds each) run before the write: on SQLite a transaction holds
    the database's one write lock, which sign-ins and draft saves wait for."""
    require_admin(admin, "configure Oracle backbones")
    _unknown_refuse(fields)
    backbone = Backbone(name=name, kind=kind, created_by=admin, **_fields_clean(fields))
    _settings_complete(backbone, app_host=app_host, detect=detect, overwrite=False)
    with transaction.atomic():
        backbone.save()
    return backbone


def backbone_update(
    *, admin, backbone: Backbone, app_host: str = "", detect: bool = False, **fields
) -> Backbone:
    """Change a backbone's settings. Runs already made keep their snapshot.
    As in ``backbone_create``, the URL's check and the detection run before
    the short transaction that writes the row."""
    require_admin(admin, "configure Oracle backbones")
    fields = _fields_clean(fields)
    _unknown_refuse(fields)
    backbone = Backbone.objects.get(pk=backbone.pk)
    _kind_change_check(backbone, fields.get("kind", backbone.kind))
    for key, value in fields.items():
        setattr(backbone, key, value)
    _settings_complete(backbone, app_host=app_host, detect=detect, overwrite=True)
    with transaction.atomic():
        locked = Backbone.objects.select_for_update().get(pk=backbone.pk)
        _kind_change_check(locked, backbone.kind)
        backbone.save()
    return backbone


def _kind_change_check(backbone: Backbone, kind: str) -> None:
    if kind != backbone.kind and backbone.runs.exists():
        raise ValidationError(
            {"kind": "This backbone has runs: its kind cannot change. Make a new one."}
        )


# Detection ---------------------------------------------------------------------

DETECT_TIMEOUT_SECONDS = 5.0
DETECT_REPLY_BYTES = 2_000_000


def _json(reply: http.Reply) -> dict | list | None:
    if reply.status != 200:
        return None
    try:
        return reply.json()
    except ValueError:
        return None


def server_detect(backbone: Backbone) -> dict:
    """What the backbone's server reports of itself, found by asking the
    endpoints each kind of server has: vLLM's model list (max_model_len), the
    llama.cpp server's /props (n_ctx), llama-cpp-python's tokenizer (no context
    figure: its error when a prompt overflows gives it later), Ollama's
    /api/show (num_ctx where the model sets it). Returns ``server``, and where found
    ``context_tokens``, ``tokenizer``, ``reply_format``, or ``error``. Only
    these figures are read from the replies; nothing of them is shown. Each
    request goes through the address policy on its connection and must be
    answered whole within DETECT_TIMEOUT_SECONDS and DETECT_REPLY_BYTES
    (oracle.backbones.http)."""
    base = backbone.base_url.rstrip("/")
    for tail in ("/chat/completions",):
        if base.endswith(tail):
            base = base[: -len(tail)]
    root = base[:-3] if base.endswith("/v1") else base
    try:
        url_check(base)
    except EndpointRefused as error:
        return {"server": "", "error": str(error)}
    found: dict = {"server": ""}
    try:
        with http.guarded_client(
            purpose=http.Purpose.BACKBONE, timeout_seconds=DETECT_TIMEOUT_SECONDS
        ) as client:

            def ask(method: str, url: str, **kwargs) -> http.Reply:
                return http.request(
                    client,
                    method,
                    url,
                    deadline_seconds=DETECT_TIMEOUT_SECONDS,
                    max_bytes=DETECT_REPLY_BYTES,
                    **kwargs,
                )

            models = _json(ask("GET", f"{base}/models"))
            entries = models.get("data", []) if isinstance(models, dict) else []
            entries = [e for e in entries if isinstance(e, dict)]
            entry = next(
                (e for e in entries if e.get("id") == backbone.model),
                entries[0] if entries else {},
            )
            if entry.get("max_model_len"):
                return {
                    "server": "vLLM",
                    "context_tokens": int(entry["max_model_len"]),
                    "tokenizer": Tokenizer.VLLM,
                    "reply_format": ReplyFormat.JSON_SCHEMA,
                }
            props = _json(ask("GET", f"{root}/props"))
            if isinstance(props, dict):
                settings_ = props.get("default_generation_settings") or {}
                n_ctx = settings_.get("n_ctx") or props.get("n_ctx")
                if n_ctx:
                    return {
                        "server": "llama.cpp server",
                        "context_tokens": int(n_ctx),
                        "tokenizer": Tokenizer.LLAMACPP,
                        "reply_format": ReplyFormat.JSON_SCHEMA,
                    }
            counted = _json(
                ask(
                    "POST",
                    f"{root}/extras/tokenize/count",
                    json={"input": "ping", "model": backbone.model},
                )
            )
            if isinstance(counted, dict) and "count" in counted:
                # It evaluates one request at a time: more in flight only
                # queue there, against the timeout.
                return {
                    "server": "llama-cpp-python",
                    "tokenizer": Tokenizer.LLAMACPP_PYTHON,
                    "reply_format": ReplyFormat.LLAMACPP_PYTHON,
                    "concurrency": 1,
                }
            shown = _json(
                ask("POST", f"{root}/api/show", json={"model": backbone.model})
            )
            if isinstance(shown, dict) and (
                "model_info" in shown or "modelfile" in shown
            ):
                # Its /v1 endpoint honours response_format json_schema (0.5 and
                # later); ``format`` is its native /api/chat field. It cuts a
                # prompt longer than num_ctx without an error: the window must
                # be right, so its num_ctx is read where the model sets it.
                found = {"server": "Ollama", "reply_format": ReplyFormat.JSON_SCHEMA}
                match = re.search(
                    r"num_ctx\s+(\d+)", str(shown.get("parameters") or "")
                )
                if match:
                    found["context_tokens"] = int(match.group(1))
                return found
    except (httpx.HTTPError, http.ReplyRefused, ValueError, TypeError) as error:
        return {
            "server": "",
            "error": f"The server could not be asked ({type(error).__name__}).",
        }
    host = (urlsplit(base).hostname or "").lower()
    if host == "api.openai.com":
        return {"server": "OpenAI", "reply_format": ReplyFormat.JSON_SCHEMA}
    return found


def _detected_apply(backbone: Backbone, found: dict, *, overwrite: bool) -> None:
    """Fill the backbone from ``found`` (server_detect): every setting found
    when ``overwrite``, else only those the admin left empty or at default."""
    if found.get("context_tokens") and (overwrite or not backbone.context_tokens):
        backbone.context_tokens = found["context_tokens"]
    if found.get("tokenizer") and (overwrite or not backbone.tokenizer):
        backbone.tokenizer = found["tokenizer"]
    if found.get("reply_format") and (
        overwrite or backbone.reply_format in ("", ReplyFormat.JSON_OBJECT)
    ):
        backbone.reply_format = found["reply_format"]
    default_concurrency = Backbone._meta.get_field("concurrency").default
    if found.get("concurrency") and (
        overwrite or backbone.concurrency in (None, default_concurrency)
    ):
        backbone.concurrency = found["concurrency"]
    backbone.server_report = {
        **{k: v for k, v in found.items()},
        "detected_at": timezone.now().isoformat(timespec="seconds"),
    }


def server_asked(backbone: Backbone) -> bool:
    """Whether the backbone's server was asked and answered: a check that
    failed ("could not be asked") does not count, and is asked again."""
    report = backbone.server_report or {}
    return bool(report.get("detected_at")) and not report.get("error")


def backbone_detect_if_new(*, backbone_id: int) -> None:
    """Detect the server of a backbone never detected, or whose last check
    failed (each chunk of a run asks until one answers), filling only what
    the admin left empty. Never raises: a server that cannot be asked keeps
    the backbone as it is, with the reason on its report for the pages."""
    backbone = Backbone.objects.filter(pk=backbone_id, kind=BackboneKind.OPENAI).first()
    if backbone is None or server_asked(backbone):
        return
    found = server_detect(backbone)
    with transaction.atomic():
        backbone = Backbone.objects.select_for_update().get(pk=backbone_id)
        if server_asked(backbone):
            return
        _detected_apply(backbone, found, overwrite=False)
        backbone.save(
            update_fields=[
                "context_tokens",
                "tokenizer",
                "reply_format",
                "concurrency",
                "server_report",
            ]
        )
