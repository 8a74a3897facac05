"""The input event: one chatbot interaction."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from schemas.citations import Citation
from schemas.settings import Limits
from schemas.tool_pairing import merge_given
from schemas.tools import (
    InputMessage,
    ReadMessages,
    ToolStep,
    drop_nulls,
    limit_steps,
    read_messages,
    step_flags,
)
from schemas.utc import utc

#: the roles a text turn of the history may have (tool traffic becomes ``Interaction.steps``)
Role = Literal["system", "user", "assistant"]
#: most flags an interaction keeps (each names one thing that could not be used as given)
MAX_FLAGS = 50


class Passage(BaseModel):
    """One retrieved context passage, with the name of its document when known; or one passage of a tool's
    result taken as evidence (``pipeline.evidence``), naming the tool, its call and its step."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="the passage's text")
    document: str | None = Field(
        None,
        description="the document's name: as given for a context; for a tool result's passage the "
        "document's id or source when the result lists documents, else 'tool:<name>'",
    )
    tool: str | None = Field(None, description="the tool whose result this passage is; None for a context")
    call_id: str | None = Field(None, description="the id of the tool call whose result this passage is")
    step: int | None = Field(None, ge=0, description="the index in Interaction.steps of that call")


class ChatMessage(BaseModel):
    """One text turn of a conversation's history: ``{"role": "user", "content": "..."}``.

    Keys whose value is null (``"refusal": null``, ``"tool_calls": null`` in OpenAI's own dumps) are
    ignored; any other key is refused, and so are tool turns and non-string content (input ``messages``
    take those: ``schemas.tools.InputMessage``; their tool calls and results become ``steps``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role = Field(description="who spoke: system, user or assistant")
    content: str = Field(description="what was said (a string)")
    name: str | None = Field(
        None, description="the speaker's name (OpenAI's optional field); kept, not judged"
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        return drop_nulls(data)


def split_conversation(
    messages: Sequence[ChatMessage], question: str | None, positions: Sequence[int] | None = None
) -> tuple[str, list[ChatMessage]]:
    """(question, history) of a conversation given as ``messages`` (see ``Interaction``).

    The current turn is the last user turn. Without ``question`` its text is the question; with one
    whose text is the same (whitespace trimmed) the messages repeat the question, and ``question`` is
    kept; with one whose text differs, the messages hold only earlier turns. The history is every turn
    before the current turn (all the messages when there is none); turns after it (the reply, when a log
    carries it) are not history: the ``answer`` field is the reply that is judged. ValueError when there
    is neither a question nor a user turn, or the question would be blank (naming the turn by its
    position in ``positions``, the input messages' indexes of these turns, when given)."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    last = users[-1] if users else None
    if question is None:
        if last is None:
            raise ValueError(
                "messages has no user turn and there is no question: give question, or a messages "
                "list with at least one turn of role user"
            )
        if not messages[last].content.strip():
            at = positions[last] if positions is not None else last
            raise ValueError(f"messages[{at}] (the last user turn, the question) is empty")
        return messages[last].content, list(messages[:last])
    if last is not None and messages[last].content.strip() == question.strip():
        return question, list(messages[:last])
    return question, list(messages)


def recent_turns(
    turns: Sequence[ChatMessage], max_turns: int, max_chars: int
) -> tuple[list[ChatMessage], int]:
    """The most recent turns that fit both limits (at most ``max_turns`` turns, ``max_chars`` characters
    of content in all), and how many older turns were dropped. Turns are kept newest first and the
    first that does not fit ends the history: only the oldest turns are ever dropped."""
    kept = 0
    chars = 0
    for turn in reversed(turns):
        if kept >= max_turns or chars + len(turn.content) > max_chars:
            break
        kept += 1
        chars += len(turn.content)
    start = len(turns) - kept
    return list(turns[start:]), start


def _given_limits(info: ValidationInfo) -> Limits | None:
    """The limits passed as validation context (``context={"limits": ...}``), if any."""
    ctx = info.context or {}
    limits = ctx.get("limits") if isinstance(ctx, dict) else None
    return limits if isinstance(limits, Limits) else None


def _limits(info: ValidationInfo) -> Limits:
    return _given_limits(info) or Limits()


def _received_at(info: ValidationInfo) -> datetime | None:
    """The time a message without a timestamp gets (``context["received_at"]``): the Kafka record's
    timestamp, the same for every redelivery of that record, so a redelivered interaction keeps its time
    and with it its row (the time is part of the tables' key, migration 011); None: the clock in the
    context (``now``, the worker's), else the wall clock (a file read outside the worker)."""
    ctx = info.context or {}
    received = ctx.get("received_at") if isinstance(ctx, dict) else None
    return received if isinstance(received, datetime) else None


def _now(info: ValidationInfo) -> datetime | None:
    """The wall clock event time is checked against (``context["now"]``); None: not checked here."""
    ctx = info.context or {}
    now = ctx.get("now") if isinstance(ctx, dict) else None
    if callable(now):
        now = now()
    if isinstance(now, datetime):
        return utc(now)
    return None


def _check_len(value: str, limit: int, field: str) -> str:
    if len(value) > limit:
        raise ValueError(f"{field} has {len(value)} characters, over the limit of {limit}")
    return value


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
#: |seconds| beyond this is not a plausible Unix time in seconds (year ~5138); pydantic would read it
#: as milliseconds, which silently turned -62135596800 (year 1) into 1968
MAX_EPOCH_SECONDS = 1e11


def epoch_seconds(value: Any) -> datetime | None:
    """A number (or a string of one) as Unix time in SECONDS, UTC; None for anything else.

    Raises ValueError for a number that is not finite or too large to be seconds (milliseconds or
    microseconds are refused rather than guessed: send seconds, or an ISO 8601 time)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        value = float(value.strip())
    if not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"timestamp {value!r} is not a time")
    if abs(value) > MAX_EPOCH_SECONDS:
        raise ValueError(
            f"timestamp {value!r} is out of range for Unix time in seconds (milliseconds are not "
            "accepted: send seconds since 1970-01-01 UTC, or an ISO 8601 time)"
        )
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=float(value))
    except (OverflowError, ValueError) as exc:  # pragma: no cover - bounded above
        raise ValueError(f"timestamp {value!r} is out of range: {exc}") from exc


def check_event_time(ts: datetime, now: datetime, max_age_days: float, max_future_s: float) -> datetime:
    """``ts`` when it lies within [now - max_age_days, now + max_future_s]; else ValueError saying why."""
    earliest = now - timedelta(days=max_age_days)
    latest = now + timedelta(seconds=max_future_s)
    if ts < earliest:
        raise ValueError(
            f"timestamp {ts.isoformat()} is more than {max_age_days:g} days before the wall clock "
            f"({now.isoformat()}; limit max_event_age_days)"
        )
    if ts > latest:
        raise ValueError(
            f"timestamp {ts.isoformat()} is more than {max_future_s:g} seconds after the wall clock "
            f"({now.isoformat()}; limit max_event_future_seconds)"
        )
    return ts


class Interaction(BaseModel):
    """A question, its retrieved contexts, the chatbot's answer and, when known, the ground truth.

    Input lines may use ``id`` for ``interaction_id`` and plain strings for passages; any field this
    model does not know is kept under ``metadata`` (nothing is dropped silently). Size limits come from
    ``Limits`` passed as validation context: ``Interaction.model_validate(d, context={"limits": ...})``.

    Event time: ``timestamp`` is an ISO 8601 time (UTC when it has no zone) or a number of SECONDS since
    1970-01-01 UTC (never milliseconds: a number too large for seconds is refused). With a wall clock in
    the context (``context={"limits": ..., "now": datetime}``, which ``streams.codec.decode`` passes for
    this model, the one messages enter by), a timestamp more than ``limits.max_event_age_days`` before
    it or ``limits.max_event_future_seconds`` after it is refused. An interaction nested in a later
    message (a Converted, an Evaluation) was checked when it entered and is not checked again.

    Conversations: ``messages`` (OpenAI's chat format, roles system, user and assistant) may come
    besides or instead of ``question``; it is input only and becomes ``question`` and ``history`` as
    ``split_conversation`` says: the question is the last user turn (``question`` wins when both are
    given) and the history is the turns before that turn. ``history`` may also be given directly (the
    turns before the question; not together with ``messages``). Validated with limits in the context (as
    ``streams.codec.decode`` and the offline dataset reader do), a history over ``limits.max_history_turns``
    turns or ``limits.max_history_chars`` characters loses its oldest turns and the interaction is
    flagged ``history_truncated``: it is evaluated, never refused, for a long conversation. Without limits
    in the context (an evaluation read back from storage) the history is kept as stored.
    """

    model_config = ConfigDict(extra="forbid")
    #: ``streams.codec.decode`` passes the wall clock in the context for this model (event-time check)
    checks_event_time: ClassVar[bool] = True

    interaction_id: str = Field(min_length=1)
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    app: str = "default"
    model: str = "unknown"
    conversation_id: str | None = None
    question: str = Field(
        "",
        description="the user's question (the last user message); required unless messages holds a user turn",
    )
    messages: list[InputMessage] | None = Field(
        None,
        exclude=True,
        description="input only: the conversation in OpenAI's chat format (with tool calls and tool turns, "
        "legacy function turns, or the GenAI semantic conventions' parts); its last user text turn is the "
        "question (unless question is given), the text turns before that turn are the history and its "
        "tool calls and results become steps",
    )
    history: list[ChatMessage] = Field(
        default_factory=list,
        description="the conversation's turns before the question, oldest first (from messages, or given)",
    )
    history_truncated: bool = Field(
        False, description="oldest history turns were dropped to fit max_history_turns / max_history_chars"
    )
    contexts: list[Passage] = Field(default_factory=list)
    steps: list[ToolStep] = Field(
        default_factory=list,
        description="the tool calls and their results the model made before answering, in order (read from "
        "messages, or given directly; given ones first, a step from messages with the call_id of a given "
        "one is not added twice); at most limits.max_steps (the earliest dropped, flagged steps_dropped)",
    )
    flags: list[str] = Field(
        default_factory=list,
        description="what was read but could not be used as given, each '<code>: <where>' "
        "(schemas.tools FLAG_*: arguments_not_json, tool_arguments_truncated, tool_result_truncated, "
        "tool_result_not_text, tool_result_without_call, content_not_text, steps_dropped); the "
        "interaction is judged with what is there",
    )
    ground_truth: str | None = None
    answer: str
    citations: list[Citation] = Field(
        default_factory=list,
        description="structured citations of the answer (schemas.citations: spans with passage positions or "
        "document names, OpenAI annotations, Anthropic citations); markers in the answer text need none",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, int] | None = None  # human labels, for measuring accuracy (eval CLI)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        received = _received_at(info) or _now(info)
        if received is not None and data.get("timestamp") is None:
            data["timestamp"] = received
        if "interaction_id" not in data and "id" in data:
            data["interaction_id"] = data.pop("id")
        if isinstance(data.get("interaction_id"), int):
            data["interaction_id"] = str(data["interaction_id"])
        contexts = data.get("contexts")
        if isinstance(contexts, str):
            data["contexts"] = [contexts]
        if isinstance(data.get("contexts"), list):
            data["contexts"] = [{"text": c} if isinstance(c, str) else c for c in data["contexts"]]
        known = set(cls.model_fields)
        extra = {k: v for k, v in data.items() if k not in known}
        if extra:
            metadata = dict(data.get("metadata") or {})
            metadata.update(extra)
            data = {k: v for k, v in data.items() if k in known}
            data["metadata"] = metadata
        return data

    @model_validator(mode="after")
    def _conversation(self, info: ValidationInfo) -> Interaction:
        """The question, history and steps from ``messages``; history and steps cut to the limits."""
        limits = _limits(info)
        given = "question" in self.model_fields_set
        flags = list(self.flags)
        if self.messages is not None:
            if self.history:
                raise ValueError(
                    "give messages or history, not both (history is the turns before the question)"
                )
            read = read_messages(self.messages)
            turns = [ChatMessage(role=t.role, content=t.content, name=t.name) for t in read.turns]
            positions = [t.index for t in read.turns]
            question, self.history = split_conversation(turns, self.question if given else None, positions)
            if not given:
                self.question = _check_len(
                    question, limits.max_question_chars, "question (the last user turn)"
                )
            self.steps = merge_given(self.steps, _mark_earlier_turns(read, self.question, given))
            flags.extend(read.flags)
            self.messages = None
        elif not given:
            raise ValueError("question: missing (give question, or messages with a user turn)")
        given_limits = _given_limits(info)
        if given_limits is not None:  # cut where limits are known (entry), never when read back
            self.history, dropped = recent_turns(
                self.history, given_limits.max_history_turns, given_limits.max_history_chars
            )
            self.history_truncated = self.history_truncated or dropped > 0
            self.steps, cut = limit_steps(
                self.steps,
                given_limits.max_steps,
                given_limits.max_tool_result_chars,
                given_limits.max_tool_arguments_chars,
            )
            flags.extend(cut)
            flags.extend(step_flags(self.steps, flags, given_limits.max_json_depth))
        self.flags = _cap_flags(flags)
        return self

    @field_validator("timestamp", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        as_seconds = epoch_seconds(value)
        return value if as_seconds is None else as_seconds

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, value: datetime, info: ValidationInfo) -> datetime:
        try:
            value = utc(value, clamp=False)
        except (OverflowError, ValueError) as exc:  # 0001-01-01T00:00:00+01:00 has no UTC time
            raise ValueError(f"timestamp {value.isoformat()} has no UTC time: {exc}") from exc
        now = _now(info)
        if now is not None:
            limits = _limits(info)
            check_event_time(value, now, limits.max_event_age_days, limits.max_event_future_seconds)
        return value

    @field_validator("app")
    @classmethod
    def _app_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_app_chars, "app")

    @field_validator("model")
    @classmethod
    def _model_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_model_chars, "model")

    @field_validator("conversation_id")
    @classmethod
    def _conversation_len(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        return _check_len(value, _limits(info).max_conversation_id_chars, "conversation_id")

    @field_validator("metadata")
    @classmethod
    def _metadata_size(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        limit = _limits(info).max_metadata_chars
        try:
            size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))
        except (ValueError, TypeError, RecursionError) as exc:
            raise ValueError(f"metadata cannot be stored as JSON: {exc}") from exc
        if size > limit:
            raise ValueError(f"metadata has {size} characters as JSON, over the limit of {limit}")
        return value

    @field_validator("interaction_id")
    @classmethod
    def _id_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_id_chars, "interaction_id")

    @field_validator("question")
    @classmethod
    def _question_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_question_chars, "question")

    @field_validator("answer")
    @classmethod
    def _answer_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_answer_chars, "answer")

    @field_validator("ground_truth")
    @classmethod
    def _gt_len(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None  # a blank ground truth is no ground truth
        return _check_len(value, _limits(info).max_ground_truth_chars, "ground_truth")

    @field_validator("citations", mode="before")
    @classmethod
    def _no_citations(cls, value: Any) -> Any:
        return [] if value is None else value  # "citations": null says there are none

    @field_validator("citations")
    @classmethod
    def _citations_count(cls, value: list[Citation], info: ValidationInfo) -> list[Citation]:
        limit = _limits(info).max_citations
        if len(value) > limit:
            raise ValueError(f"citations has {len(value)} items, over the limit of {limit}")
        return value

    @field_validator("contexts")
    @classmethod
    def _contexts_size(cls, value: list[Passage], info: ValidationInfo) -> list[Passage]:
        limits = _limits(info)
        if len(value) > limits.max_contexts:
            raise ValueError(f"contexts has {len(value)} passages, over the limit of {limits.max_contexts}")
        for i, passage in enumerate(value):
            if passage.document is not None and len(passage.document) > limits.max_document_chars:
                raise ValueError(
                    f"contexts[{i}].document has {len(passage.document)} characters, over the limit of "
                    f"{limits.max_document_chars}"
                )
        # document names go into the judge's prompt too: they count in the budget
        total = sum(len(p.text) + len(p.document or "") for p in value)
        if total > limits.max_context_chars:
            raise ValueError(
                f"contexts have {total} characters in all (passages and document names), over the limit "
                f"of {limits.max_context_chars}"
            )
        return value


def _mark_earlier_turns(read: ReadMessages, question: str, given: bool) -> list[ToolStep]:
    """The steps read from messages, each marked ``earlier_turn`` when it belongs to a user turn before
    the current question. When the question is the messages' last user turn, the steps before that turn
    are earlier. When it is not in the messages (``question`` given and differing, or no user turn), the
    steps before the last user turn are earlier, and so are later ones that an assistant text turn
    without tool calls answered (that turn was the reply to an earlier question)."""
    users = [t for t in read.turns if t.role == "user"]
    last_user = users[-1].index if users else -1
    in_messages = bool(users) and (not given or users[-1].content.strip() == question.strip())
    replies = [t.index for t in read.turns if t.role == "assistant" and not t.calls_tools]
    last_reply = replies[-1] if replies and not in_messages else -1
    out: list[ToolStep] = []
    for at, step in read.steps:
        earlier = at < max(last_user, last_reply)
        out.append(step.model_copy(update={"earlier_turn": True}) if earlier else step)
    return out


def _cap_flags(flags: list[str]) -> list[str]:
    """The flags without repeats, at most MAX_FLAGS (the last saying how many more there were)."""
    unique = list(dict.fromkeys(flags))
    if len(unique) <= MAX_FLAGS:
        return unique
    more = len(unique) - (MAX_FLAGS - 1)
    return [*unique[: MAX_FLAGS - 1], f"more_flags: {more} more not kept"]


def interaction_digest(interaction: Interaction) -> str:
    """The sha256 of the interaction's canonical JSON (keys sorted, no spaces): which message an
    interaction's parts come from when two messages share one interaction_id. Computed once, where the
    interaction enters judging (``pipeline.convert.convert``), and carried in every part."""
    canonical = json.dumps(
        interaction.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
