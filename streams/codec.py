"""Bytes <-> pydantic models at every stream boundary, and the dead letters for what does not validate."""

from __future__ import annotations

import base64
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from schemas.deadletter import DeadLetter
from schemas.results import Stage
from schemas.settings import Limits

M = TypeVar("M", bound=BaseModel)


class DecodeError(Exception):
    """A message that is not valid JSON or does not validate against its model; the text says why."""

    def __init__(self, message: str, interaction_id: str | None = None) -> None:
        super().__init__(message)
        self.interaction_id = interaction_id


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
    """Parse and validate one message; raise DecodeError naming the field and the reason."""
    if raw is None:
        raise DecodeError("empty message (no value)")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"not valid JSON: {exc}") from exc
    try:
        return model.model_validate(data, context={"limits": limits or Limits()})
    except ValidationError as exc:
        raise DecodeError(
            f"invalid {model.__name__}: {describe_validation_error(exc)}", interaction_id=_guess_id(data)
        ) from exc


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def dead_letter(
    *,
    stage: Stage,
    error: BaseException,
    payload: bytes | str | None,
    source_topic: str | None,
    interaction_id: str | None = None,
) -> DeadLetter:
    if interaction_id is None and isinstance(error, DecodeError):
        interaction_id = error.interaction_id
    return DeadLetter(
        stage=stage,
        error_type=type(error).__name__,
        error=str(error) or repr(error),
        source_topic=source_topic,
        interaction_id=interaction_id,
        payload=payload_text(payload),
    )
