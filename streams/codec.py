"""Bytes <-> pydantic models at every stream boundary, and the dead letters for what does not validate."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from schemas.deadletter import DeadLetter
from schemas.errors import InvalidMessage, StageError
from schemas.json_input import read_json
from schemas.results import Stage
from schemas.settings import Limits
from schemas.validation import describe_validation_error

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


def _guess_id(data: Any, max_chars: int = 256) -> str | None:
    """The interaction id a message names, when it is a plausible one (a string or integer up to
    ``max_chars``): it keys the dead letter."""
    if isinstance(data, dict):
        for key in ("interaction_id", "id"):
            value = data.get(key)
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and abs(value) < 10**max_chars:
                return str(value)
            if isinstance(value, str) and 0 < len(value) <= max_chars:
                return value
        inner = data.get("interaction")
        if isinstance(inner, dict):
            return _guess_id(inner, max_chars)
    return None


def _may_hold_constant(raw: bytes | str) -> bool:
    """``NaN`` or ``Infinity`` somewhere in the message: pydantic's parser reads them as numbers, which
    ``read_json`` refuses (a text that only mentions them takes the checked path, to the same end)."""
    if isinstance(raw, str):
        return "NaN" in raw or "Infinity" in raw
    return b"NaN" in raw or b"Infinity" in raw


def decode(
    raw: bytes | str | None,
    model: type[M],
    limits: Limits | None = None,
    now: datetime | None = None,
    received_at: datetime | None = None,
    *,
    between_stages: bool = False,
    values: bool = True,
) -> M:
    """Parse and validate one message; raise InvalidMessage naming the field and the reason.

    Nothing else escapes: invalid UTF-8, JSON nested deeper than ``limits.max_json_depth`` (checked
    before parsing, without recursion), NaN, numbers Python refuses, RecursionError and MemoryError all
    become InvalidMessage. A model that ``checks_event_time`` (Interaction, the model messages enter by)
    gets ``now`` (the worker's clock; without it no time is too far ahead) to check its timestamp
    against, and ``received_at`` (the Kafka record's timestamp) as the timestamp of a message that
    carries none. ``values=False`` (``privacy.mode`` all): the reason quotes nothing of the message
    (``schemas.validation``).

    ``between_stages``: a message on a topic between the worker's stages (a Converted, a JudgeResult,
    an Evaluation), written by a worker's ``encode``. It is validated in full all the same, in one pass
    of pydantic's own JSON parser instead of ``read_json`` and then the model (the interaction it
    carries was checked at entry; it cost the worker a decode at every hop); one that fails there, or
    may hold what only ``read_json`` refuses (``_may_hold_constant``), goes through the checks above,
    so its InvalidMessage says why as for any message."""
    if raw is None:
        raise InvalidMessage("empty message (no value)")
    limits = limits or Limits()
    context: dict[str, Any] = {"limits": limits}
    if getattr(model, "checks_event_time", False):
        if now is not None:
            context["now"] = now
        if received_at is not None:
            context["received_at"] = received_at
    elif getattr(model, "stamped_on_receipt", False) and (received_at or now) is not None:
        context["received_at"] = received_at or now
    if between_stages and not _may_hold_constant(raw):
        try:
            return model.model_validate_json(raw, context=context)
        except Exception:  # not what a stage writes: the checked parse below says why
            pass
    try:
        data = read_json(raw, limits.max_json_depth)
    except ValueError as exc:
        raise InvalidMessage(f"not valid JSON: {exc}") from None
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise InvalidMessage(
            f"invalid {model.__name__}: {describe_validation_error(exc, values=values, model=model)}",
            interaction_id=_guess_id(data, limits.max_id_chars),
        ) from None
    except Exception as exc:  # RecursionError, MemoryError, a validator's own bug: still a bad message
        why = f"{type(exc).__name__}: {exc}" if values else type(exc).__name__
        raise InvalidMessage(
            f"invalid {model.__name__}: {why}",
            interaction_id=_guess_id(data, limits.max_id_chars),
        ) from None


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def original_of(raw: bytes | str | None) -> str | None:
    """The Interaction JSON inside a message when it is there: the message itself when it looks like an
    interaction (a question or messages, and an answer), or its ``interaction`` object (a Converted,
    with the values behind its placeholders put back when it carries them: ``privacy.mode`` judge);
    else None."""
    if raw is None:
        return None
    try:  # the message may be what failed to decode: parse it safely, and give up quietly
        data = read_json(raw, Limits().max_json_depth)
        if not isinstance(data, dict):
            return None
        inner = data.get("interaction")
        if isinstance(inner, dict):
            originals = data.get("originals")
            if isinstance(originals, dict) and originals:
                from pipeline.privacy.mask import restore_interaction
                from schemas.interaction import Interaction

                restored = restore_interaction(Interaction.model_validate(inner), originals)
                return restored.model_dump_json()
            return json.dumps(inner, ensure_ascii=False)
    except Exception:
        return None
    if ("question" in data or "messages" in data) and "answer" in data:
        return payload_text(raw)
    return None


def fit_payload(text: str, max_bytes: int) -> tuple[str, int, str | None, bool]:
    """(payload, byte length of the whole, sha256 of the whole when cut, cut?): a payload over
    ``max_bytes`` (UTF-8) keeps its longest prefix that fits, cut on a character boundary."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, len(data), None, False
    prefix = data[:max_bytes].decode("utf-8", "ignore")  # (a cut lone surrogate is dropped)
    return prefix, len(data), hashlib.sha256(data).hexdigest(), True


def fit_letter(letter: DeadLetter, max_bytes: int) -> DeadLetter:
    """The letter within about ``max_bytes`` (so the broker takes it): a longer payload is cut to the
    budget (``truncated``, with the whole's sha256 and byte length); an ``original`` that does not fit
    in what is left is dropped (None); the error text is capped at 4000 characters."""
    text, size, digest, truncated = fit_payload(letter.payload, max_bytes)
    original = letter.original
    if original is not None and len(original.encode("utf-8", "surrogatepass")) > max_bytes - len(
        text.encode("utf-8", "surrogatepass")
    ):
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


def stage_of(exc: BaseException, default: Stage) -> Stage:
    """The stage a failure on a message is filed under: "validate" for a message that does not decode,
    the failing stage of a fused evaluation, else the processor's own stage."""
    if isinstance(exc, InvalidMessage):
        return "validate"
    if isinstance(exc, StageError):
        return exc.stage
    return default


@dataclass(frozen=True, order=True)
class Origin:
    """Where a message was read: topic, partition and offset."""

    topic: str
    partition: int
    offset: int

    @classmethod
    def of(cls, tp: Any, offset: int) -> Origin:
        """From a faust TP (``topic``, ``partition``) and an offset; anything else is taken as a topic
        name, partition 0."""
        topic, partition = getattr(tp, "topic", None), getattr(tp, "partition", None)
        if not isinstance(topic, str) or not isinstance(partition, int):
            topic, partition = str(tp), 0
        return cls(topic, partition, int(offset))

    @classmethod
    def of_event(cls, event: Any) -> Origin | None:
        """Where a faust event's message was read; None when the event does not say."""
        msg = getattr(event, "message", None)
        tp, offset = getattr(msg, "tp", None), getattr(msg, "offset", None)
        return None if tp is None or not isinstance(offset, int) else cls.of(tp, offset)

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


def dead_letter_id(stage: Stage, payload: str, origin: Origin | None, interaction_id: str | None) -> str:
    """The same for every time one message is dead-lettered at one stage: the sha256 of where it was
    read (topic, partition, offset) with the stage and the interaction id (one message can name several
    interactions, e.g. the spans of one OTLP export), or, for what was not read from Kafka as it is,
    of the stage and the payload."""
    if origin is not None:
        parts = [
            "kafka",
            origin.topic,
            str(origin.partition),
            str(origin.offset),
            stage,
            interaction_id or "",
        ]
    else:
        parts = ["payload", stage, payload]
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def dead_letter(
    *,
    stage: Stage,
    error: BaseException,
    payload: bytes | str | None,
    origin: Origin | None = None,
    source_topic: str | None = None,
    interaction_id: str | None = None,
    original: str | None = None,
    failed_at: datetime,
    values: bool = True,
) -> DeadLetter:
    """The one way a failure becomes a dead letter: the stage, the reason, the original message (as
    text), its topic (``source_topic``, else ``origin``'s), where it was read (``origin``), its
    interaction id (given, or what an undecodable message named) and the original Interaction JSON to
    replay onto ``interactions`` (when not given, the one the payload is or carries: ``original_of``).
    Its id is stable for the message (``dead_letter_id``); ``failed_at`` comes from the worker's clock.
    A ValidationError's reason is ``schemas.validation``'s, without the input's values when ``values``
    is False. ``StreamContext.dead_letter`` sends it, fitted to the byte budget (``fit_letter``)."""
    if interaction_id is None and isinstance(error, InvalidMessage):
        interaction_id = error.interaction_id
    text = payload_text(payload)
    try:
        if isinstance(error, ValidationError):
            reason = f"invalid {error.title}: {describe_validation_error(error, values=values)}"
        else:
            reason = str(error) or repr(error)
    except Exception as exc:  # an exception whose str() fails still gets its letter
        reason = f"{type(error).__name__} (its message could not be read: {type(exc).__name__})"
    return DeadLetter(
        dead_letter_id=dead_letter_id(stage, text, origin, interaction_id),
        stage=stage,
        error_type=type(error).__name__,
        error=reason[:4000],
        source_topic=source_topic or (origin.topic if origin is not None else None),
        interaction_id=interaction_id,
        payload=text,
        payload_bytes=len(text.encode("utf-8", "surrogatepass")),
        original=original if original is not None else original_of(payload),
        failed_at=failed_at,
    )
