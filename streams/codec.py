"""Bytes <-> pydantic models at every stream boundary, and the dead letters for what does not validate."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from schemas.deadletter import DeadLetter
from schemas.errors import InvalidMessage
from schemas.results import Stage
from schemas.settings import Limits

M = TypeVar("M", bound=BaseModel)


def payload_text(raw: bytes | str | None) -> str:
    """The original message as text; bytes that are not UTF-8 are kept as base64 with a prefix."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode("ascii")


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``field.path: reason``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(message)"
        lines.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(lines)


def _guess_id(data: Any) -> str | None:
    if isinstance(data, dict):
        for key in ("interaction_id", "id"):
            value = data.get(key)
            if isinstance(value, str | int):
                return str(value)
        inner = data.get("interaction")
        if isinstance(inner, dict):
            return _guess_id(inner)
    return None


def decode(raw: bytes | str | None, model: type[M], limits: Limits | None = None) -> M:
    """Parse and validate one message; raise InvalidMessage naming the field and the reason."""
    if raw is None:
        raise InvalidMessage("empty message (no value)")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidMessage(f"not valid JSON: {exc}") from exc
    try:
        return model.model_validate(data, context={"limits": limits or Limits()})
    except ValidationError as exc:
        raise InvalidMessage(
            f"invalid {model.__name__}: {describe_validation_error(exc)}", interaction_id=_guess_id(data)
        ) from exc


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def original_of(raw: bytes | str | None) -> str | None:
    """The Interaction JSON inside a message when it is there: the message itself when it looks like an
    interaction (question and answer), or its ``interaction`` object (a Converted); else None."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    inner = data.get("interaction")
    if isinstance(inner, dict):
        return json.dumps(inner, ensure_ascii=False)
    if "question" in data and "answer" in data:
        return payload_text(raw)
    return None


def fit_payload(text: str, max_bytes: int) -> tuple[str, int, str | None, bool]:
    """(payload, byte length of the whole, sha256 of the whole when cut, cut?): a payload over
    ``max_bytes`` (UTF-8) keeps its longest prefix that fits, cut on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, len(data), None, False
    prefix = data[:max_bytes].decode("utf-8", "ignore")
    return prefix, len(data), hashlib.sha256(data).hexdigest(), True


def fit_letter(letter: DeadLetter, max_bytes: int) -> DeadLetter:
    """The letter within about ``max_bytes`` (so the broker takes it): a longer payload is cut to the
    budget (``truncated``, with the whole's sha256 and byte length); an ``original`` that does not fit
    in what is left is dropped (None); the error text is capped at 4000 characters."""
    text, size, digest, truncated = fit_payload(letter.payload, max_bytes)
    original = letter.original
    if original is not None and len(original.encode("utf-8")) > max_bytes - len(text.encode("utf-8")):
        original = None
    return letter.model_copy(
        update={
            "payload": text,
            "payload_bytes": size,
            "payload_sha256": digest if truncated else letter.payload_sha256,
            "truncated": truncated or letter.truncated,
            "original": original,
            "error": letter.error[:4000],
        }
    )


def dead_letter(
    *,
    stage: Stage,
    error: BaseException,
    payload: bytes | str | None,
    source_topic: str | None,
    interaction_id: str | None = None,
    original: str | None = None,
) -> DeadLetter:
    """The dead letter of a message; ``original`` is the Interaction JSON when known (replayable onto
    interactions). ``StreamContext.send_dead`` fits it to the byte budget (``fit_letter``)."""
    if interaction_id is None and isinstance(error, InvalidMessage):
        interaction_id = error.interaction_id
    text = payload_text(payload)
    return DeadLetter(
        stage=stage,
        error_type=type(error).__name__,
        error=str(error) or repr(error),
        source_topic=source_topic,
        interaction_id=interaction_id,
        payload=text,
        payload_bytes=len(text.encode("utf-8")),
        original=original,
    )
