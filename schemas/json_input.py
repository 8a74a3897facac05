"""Reading JSON that came from outside: a message, a request body, a file's line, or a string inside one
that holds JSON (a tool's arguments or result, an OpenTelemetry attribute).

``read_json`` is ``json.loads`` made safe for untrusted input: the text's encoding is read as
``json.loads`` reads bytes (UTF-8, or UTF-16/32 with its BOM), the nesting depth is checked first without
recursion (``schemas.json_depth``), NaN and Infinity are refused, a string holding a lone UTF-16
surrogate is refused (no later stage could encode it), and every failure is a ``ValueError`` saying why
(a RecursionError or MemoryError never escapes as itself). ``json_value`` asks whether a string is JSON
at all, under the same checks; ``first_object`` finds the first JSON object in prose around it.

Where the depth is not a setting at hand, ``DEFAULT_MAX_DEPTH`` is ``limits.max_json_depth``'s default.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.json_depth import json_depth_exceeds

#: ``limits.max_json_depth``'s default, for JSON inside a message whose own depth was checked already
DEFAULT_MAX_DEPTH = 64


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _text_of(raw: bytes | str) -> str:
    """The message as text (UTF-8, or UTF-16/32 with its BOM as json.loads reads them); ValueError when
    the bytes are not valid in that encoding."""
    if isinstance(raw, str):
        return raw
    encoding = json.detect_encoding(raw)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid {encoding.upper()}: {exc.reason} at byte {exc.start}") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_json(raw: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The JSON value of ``raw``, read as untrusted input (module docstring); ValueError saying why not."""
    text = _text_of(raw)
    if json_depth_exceeds(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels (limit max_json_depth)")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
        if "\\u" in text:  # an escaped lone surrogate parses, but no later stage could encode it
            json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff unpaired)") from None
    except ValueError:
        raise
    except Exception as exc:  # RecursionError, MemoryError: never escape as themselves
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    return data


def json_value(text: str, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[bool, Any]:
    """(True, value) when ``text`` is JSON that ``read_json`` takes, else (False, None)."""
    try:
        return True, read_json(text, max_depth)
    except ValueError:
        return False, None


def first_object(text: str, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any] | None:
    """The first JSON object in ``text``, which may have prose or ``` fences around it (a model's answer);
    None when it holds none, or nests deeper than ``max_depth`` (checked before any parsing)."""
    if json_depth_exceeds(text, max_depth):
        return None
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None
