"""JSON read with limits, for text a user sends (prediction files, API bodies,
form fields): nesting deeper than ``MAX_DEPTH`` or an integer longer than
``MAX_INT_DIGITS`` is refused with a message before the decoder recurses or
converts, instead of a RecursionError or Python's 4,300-digit ValueError (a
500). So are what no database column takes: an integer beyond the signed
64-bit range (SQLite's OverflowError), a number beyond a double (1e400,
NaN, Infinity: not JSON to PostgreSQL) and a NUL character in a string
(PostgreSQL refuses it in text and jsonb). In the project package, so that
every app may use it."""

from __future__ import annotations

import json
import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 64
MAX_INT_DIGITS = 19  # a signed 64-bit id has at most 19 digits
MIN_INT, MAX_INT = -(2**63), 2**63 - 1


class JsonLimitError(ValueError):
    """The text is JSON beyond the limits; the message says which."""


def _depth_checked(text: str, max_depth: int) -> None:
    """Raise if brackets nest deeper than ``max_depth`` (brackets inside strings
    do not count); one pass, no recursion."""
    depth = 0
    in_string = False
    escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                raise JsonLimitError(
                    f"nested deeper than {max_depth} levels of arrays and objects"
                )
        elif char in "]}":
            depth -= 1


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise JsonLimitError(
            f"an integer of {len(digits.lstrip('-'))} digits (at most "
            f"{MAX_INT_DIGITS} are accepted)"
        )
    number = int(digits)
    if not MIN_INT <= number <= MAX_INT:
        raise JsonLimitError(
            f"the integer {digits} is beyond the 64-bit range ({MIN_INT} to {MAX_INT})"
        )
    return number


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise JsonLimitError(f"the number {text[:40]} is beyond the range of a double")
    return number


def _no_constant(name: str):
    raise JsonLimitError(f"{name} is not a number JSON allows")


def _nul_checked(value) -> None:
    """Raise if a string (a key or a value) holds a NUL character; recursion
    is bounded by ``_depth_checked``, which ran first."""
    if isinstance(value, str):
        if "\x00" in value:
            raise JsonLimitError("a NUL character (\\u0000) in a string")
    elif isinstance(value, dict):
        for key, item in value.items():
            _nul_checked(key)
            _nul_checked(item)
    elif isinstance(value, list):
        for item in value:
            _nul_checked(item)


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_DEPTH):
    """``json.loads`` within the limits. Raises ``JsonLimitError`` for text
    beyond them and ``json.JSONDecodeError`` for text that is not JSON."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    _depth_checked(text, max_depth)
    value = json.loads(
        text,
        parse_int=_bounded_int,
        parse_float=_finite_float,
        parse_constant=_no_constant,
    )
    _nul_checked(value)
    return value


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with the same limits: a body beyond them is a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", "utf-8")
        try:
            return loads_bounded(stream.read().decode(encoding))
        except (JsonLimitError, ValueError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
