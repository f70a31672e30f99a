"""How OpenAI-compatible servers speak (vLLM, Ollama, llama.cpp server,
llama-cpp-python, OpenAI and the gateways): their URLs, the reply's JSON
Schema in each server's dialect, their tokenizer endpoints, and how they say
a prompt did not fit or when to come back. The Oracle's backbone
(oracle.backbones.openai_compat) and the agents' client (agents.llm) both
speak through here."""

from __future__ import annotations

import email.utils
import re
import time

# How servers say a prompt did not fit (OpenAI, vLLM, llama-cpp-python, llama.cpp
# server, TGI), and the figures some of them give.
OVERFLOW = re.compile(
    r"context[ _](length|window|size)|maximum context|too many (input )?tokens"
    r"|exceeds? the (available )?context|prompt is too long",
    re.IGNORECASE,
)
CONTEXT_SIZE = re.compile(
    r"maximum context length is (\d+)|context window of (\d+)|\"n_ctx\"\s*:\s*(\d+)",
    re.IGNORECASE,
)
PROMPT_SIZE = re.compile(
    r"\((\d+) in the messages|has (\d+) input tokens|requested tokens \((\d+)\)"
    r"|\"n_prompt_tokens\"\s*:\s*(\d+)",
    re.IGNORECASE,
)
# Tokens a message's chat-template framing adds to a raw tokenizer's count,
# and those the template adds once (the reply's header, a BOS). ChatML
# (SmolLM2, Qwen): "<|im_start|>role\n ... <|im_end|>\n" is 5 a message and
# "<|im_start|>assistant\n" 3 more; Llama 3: "<|start_header_id|>role
# <|end_header_id|>\n\n ... <|eot_id|>" is 5 a message, BOS and the reply's
# header 5 more. At 4 a message and nothing more, a SmolLM2 prompt counted
# at its budget of 1,784 was 1,785 by the server's usage.
FRAMING_TOKENS = 5
FRAMING_ONCE_TOKENS = 5


def first_int(pattern: re.Pattern, text: str) -> int | None:
    match = pattern.search(text or "")
    if not match:
        return None
    return next(int(g) for g in match.groups() if g)


def chat_url(base_url: str) -> str:
    """The chat-completions URL of a backbone's base URL."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return f"{base}/chat/completions"


def root_url(base_url: str) -> str:
    """The server's root: the base URL without /chat/completions and /v1."""
    root = base_url.rstrip("/")
    for tail in ("/chat/completions", "/v1"):
        if root.endswith(tail):
            root = root[: -len(tail)]
    return root


class ServerClient:
    """What a client of an OpenAI-compatible server derives from its settings
    on ``self`` (``base_url``, ``chars_per_token``, ``observed_ratios``): the
    chat URL, the server's root, and the prompt estimate's ratio. Shared by
    the Oracle's backbone and the agents' client."""

    base_url: str
    chars_per_token: float
    observed_ratios: list[float]

    @property
    def url(self) -> str:
        return chat_url(self.base_url)

    @property
    def root_url(self) -> str:
        """The server's root: the base URL without /chat/completions and /v1."""
        return root_url(self.base_url)

    def ratio(self) -> float:
        """The estimate's characters per token: the backbone's calibration, or
        less if a prompt of this client's showed fewer (with 3 % to spare)."""
        if not self.observed_ratios:
            return self.chars_per_token
        return min(self.chars_per_token, 0.97 * min(self.observed_ratios))


def token_count_request(
    tokenizer: str, *, root: str, model: str, messages: list[dict]
) -> tuple[str, dict] | None:
    """``(url, body)`` asking the server's ``tokenizer`` (a backbone's
    tokenizer: vllm, llamacpp_python, llamacpp) to count ``messages``; None
    for none. Raw tokenizers count the contents joined by newlines."""
    if tokenizer == "vllm":
        return f"{root}/tokenize", {"model": model, "messages": messages}
    text = "\n".join(m.get("content") or "" for m in messages)
    if tokenizer == "llamacpp_python":
        return f"{root}/extras/tokenize/count", {"input": text, "model": model}
    if tokenizer == "llamacpp":
        return f"{root}/tokenize", {"content": text}
    return None


def token_count_read(tokenizer: str, data, messages: list[dict]) -> int:
    """The prompt's tokens from the tokenizer's JSON reply ``data``: vLLM
    counts the chat template too; a raw tokenizer's count gets
    FRAMING_TOKENS a message and FRAMING_ONCE_TOKENS for it.
    KeyError/TypeError/ValueError when the reply is not a count."""
    if tokenizer == "vllm":
        return int(data["count"])
    framing = FRAMING_TOKENS * len(messages) + FRAMING_ONCE_TOKENS
    if tokenizer == "llamacpp_python":
        return int(data["count"]) + framing
    return len(data["tokens"]) + framing


def response_described(status: int, headers, text: str) -> str:
    """A response as the run page may show it: status and content type, and
    whether it said the prompt was too long (the platform's own words). Never
    anything of the body: a URL that is not an LLM server may return anything
    (issue 14)."""
    content_type = (headers.get("content-type") or "no content type").split(";")[0]
    described = f"HTTP {status} ({content_type.strip()})"
    if OVERFLOW.search(text or ""):
        described += ", the prompt does not fit the model's context window"
    return described


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None if absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def reply_format_apply(
    body: dict, form: str, schema: dict | None, name: str = "window_label"
) -> dict:
    """``body`` with the reply's JSON Schema in the server's dialect
    (``form``, a backbone's reply format): OpenAI/vLLM/llama.cpp's
    json_schema, llama-cpp-python's schema beside json_object, Ollama's
    ``format``; a plain JSON object where no schema goes or none is given.
    The Oracle and the agents send theirs the same way."""
    if form == "json_schema" and schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": False},
        }
    elif form == "llamacpp_python" and schema is not None:
        body["response_format"] = {"type": "json_object", "schema": schema}
    elif form == "ollama" and schema is not None:
        body["format"] = schema
    elif form and form != "none":
        body["response_format"] = {"type": "json_object"}
    return body


__all__ = [
    "CONTEXT_SIZE",
    "FRAMING_ONCE_TOKENS",
    "FRAMING_TOKENS",
    "OVERFLOW",
    "PROMPT_SIZE",
    "chat_url",
    "first_int",
    "reply_format_apply",
    "response_described",
    "retry_after_seconds",
    "root_url",
    "token_count_read",
    "token_count_request",
]
