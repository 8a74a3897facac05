"""Tool calls and their results, however they were recorded, paired into steps by one rule.

Both readers of tool traffic use this module: the chat-message reader (``schemas.tools.read_messages``,
an interaction's ``messages``) and the OpenTelemetry reader (``pipeline.otlp``, a trace's messages, the
outputs of its calls that only asked for tools, and its tool spans). So the same conversation gives the
same steps whichever way it arrives.

The vocabulary: a content part of a kind in ``CALL_PARTS`` is a call (``part_call``: its id, name and
arguments, flat or under OpenAI's ``function``), a part of a kind in ``RESULT_PARTS`` a result
(``part_result``: its call id and its value under the first of ``RESULT_KEYS``).

The rule (``StepPairing``): a result (or a tool's run) is paired with the call of the same id; a result
whose id matches no call takes the first call of its name still without one, else the first call
without one (some SDKs record an item id on the call and the call id on the result; legacy functions
carry no id at all); else it is a step of its own, flagged ``tool_result_without_call``. A call whose
result never came is a step without one (status ``no_result``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from schemas.json_input import json_value

#: a tool result named a call id (or a function) no earlier call has: kept as a step of its own
FLAG_RESULT_WITHOUT_CALL = "tool_result_without_call"

#: content parts that are tool calls: the GenAI conventions' ``tool_call``, the Responses API's
#: ``function_call``
CALL_PARTS = ("tool_call", "function_call")
#: content parts that are tool results: GenAI's ``tool_call_response``, the Responses API's
#: ``function_call_output``, Anthropic's ``tool_result``
RESULT_PARTS = ("tool_call_response", "function_call_output", "tool_result")
TOOL_PARTS = frozenset(CALL_PARTS + RESULT_PARTS)
#: where a result part holds the tool's value, in order of preference
RESULT_KEYS = ("response", "result", "output", "content")
#: where a part (or a tool message) names the call it belongs to, in order of preference
CALL_ID_KEYS = ("id", "call_id", "tool_call_id")


@dataclass(frozen=True)
class CallFound:
    """A tool call the model asked for, as a reader found it."""

    call_id: str | None
    name: str
    arguments: Any


@dataclass(frozen=True)
class ResultFound:
    """A tool's result as the model received it, as a reader found it; ``where`` names its place for the
    flag when it answers no call."""

    call_id: str | None
    name: str | None
    result: str | None
    error: bool = False
    where: str = ""


@dataclass(frozen=True)
class RunFound:
    """A tool's run recorded apart from the messages (a tool span): what it was given, what it returned,
    whether it failed and when it ran (Unix nanoseconds, 0 where unknown)."""

    call_id: str | None
    name: str
    arguments: Any
    result: str | None
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0
    not_text: str | None = None  # the kind of a result recorded as a value that is not text (``bytes``)


def opt_str(value: Any) -> str | None:
    """A key's value as a string; None for none or an empty string."""
    return None if value is None or value == "" else str(value)


def part_call(part: Mapping[str, Any]) -> CallFound | None:
    """A call from a tool-call part or an entry of OpenAI's ``tool_calls``: ``{"id", "name",
    "arguments"}`` flat, or ``{"id", "function": {"name", "arguments"}}``; the id is ``call_id`` where given
    (the Responses API's ``function_call`` has both, ``id`` naming the item), else ``id``; None without a
    name."""
    inner = part.get("function")
    function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else part
    name = function.get("name")
    if not name:
        return None
    call_id = opt_str(part.get("call_id") or part.get("id"))  # (the Responses API: call_id, and an item id)
    return CallFound(call_id, str(name), function.get("arguments"))


def part_call_id(part: Mapping[str, Any]) -> str | None:
    """The call id a result part names (the first of ``CALL_ID_KEYS`` given)."""
    return opt_str(next((part[k] for k in CALL_ID_KEYS if part.get(k) not in (None, "")), None))


def part_result(part: Mapping[str, Any]) -> Any:
    """The value a result part holds (the first of ``RESULT_KEYS`` present), None for none."""
    return next((part[k] for k in RESULT_KEYS if k in part), None)


@dataclass
class PairedStep:
    """One step being paired: its call (or what stood for it), its result and its run."""

    name: str
    call_id: str | None
    arguments: Any = None
    result: str | None = None
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0
    earlier_turn: bool = False
    at: int = -1  # the reader's position of the call (a message index), or of its result when stray
    ran: bool = False  # a tool's run was matched to it
    stray: str | None = None  # where a result that matched no call was found
    not_text: str | None = None  # its run recorded the result as a value that is not text

    def as_dict(self) -> dict[str, Any]:
        """The step as ``schemas.tools.ToolStep`` takes it (which parses JSON arguments and cuts what is
        over the limits); the status is given only for an error a run recorded, else the result decides
        it (none: ``no_result``; an error result: ``error``)."""
        step: dict[str, Any] = {
            "name": self.name,
            "call_id": self.call_id,
            "arguments": self.arguments,
            "result": self.result,
            "started_at": datetime.fromtimestamp(self.start_ns / 1e9, tz=UTC) if self.start_ns else None,
            "duration_ms": (self.end_ns - self.start_ns) / 1e6 if self.start_ns and self.end_ns else None,
            "earlier_turn": self.earlier_turn,
        }
        if self.error:
            step["status"] = "error"
        return step


class StepPairing:
    """The steps of an answer, each result and run paired with its call by the module's rule, in the
    order their calls (or stray results) came. Each lookup resumes where the last one of its kind
    stopped (a step once given a result or a run keeps it), so 10,000 steps are paired in linear time."""

    def __init__(self) -> None:
        self.steps: list[PairedStep] = []
        self.by_id: dict[str, PairedStep] = {}
        self.by_name: dict[str, list[PairedStep]] = {}
        self.claimed: set[int] = set()  # steps a later record of the same call was matched to
        self._cursor: dict[tuple[str, str | None], int] = {}

    def add(self, step: PairedStep) -> PairedStep:
        self.steps.append(step)
        self.by_name.setdefault(step.name, []).append(step)
        if step.call_id:
            self.by_id.setdefault(step.call_id, step)
        return step

    def _first(self, kind: str, name: str | None, free: Callable[[PairedStep], bool]) -> PairedStep | None:
        """The first step (of ``name``; None: of any name) for which ``free`` holds."""
        items = self.steps if name is None else self.by_name.get(name, [])
        at = self._cursor.get((kind, name), 0)
        while at < len(items) and not free(items[at]):
            at += 1
        self._cursor[(kind, name)] = at
        return items[at] if at < len(items) else None

    def _match(
        self, kind: str, call_id: str | None, name: str | None, free: Callable[[PairedStep], bool]
    ) -> PairedStep | None:
        if call_id and call_id in self.by_id:
            return self.by_id[call_id]
        return (self._first(kind, name, free) if name else None) or self._first(kind, None, free)

    def call(self, found: CallFound, earlier: bool = False, at: int = -1, again: bool = False) -> None:
        """A tool call. ``again``: a call perhaps recorded already under another id (the same name and
        arguments, not yet claimed), as the output of the model call that asked for it."""
        if found.call_id and found.call_id in self.by_id:
            return
        if again:
            same = self._first(
                "claim", found.name, lambda s: id(s) not in self.claimed and not s.earlier_turn
            )
            if same is not None and _same(same.arguments, found.arguments):
                self.claimed.add(id(same))
                if found.call_id:
                    self.by_id[found.call_id] = same
                return
        self.add(PairedStep(found.name, found.call_id, found.arguments, earlier_turn=earlier, at=at))

    def result(self, found: ResultFound, earlier: bool = False, at: int = -1) -> None:
        """A tool's result, paired with its call; a step of its own (flagged) when it answers none."""
        step = self._match("result", found.call_id, found.name, lambda s: s.result is None)
        if step is None:
            step = self.add(
                PairedStep(
                    found.name or "unknown", found.call_id, earlier_turn=earlier, at=at,
                    stray=found.where or "a result",
                )
            )  # fmt: skip
        if step.result is None:
            step.result, step.error = found.result, step.error or found.error
            if found.call_id and step.call_id != found.call_id:  # (the call was recorded by item id)
                self.by_id[found.call_id] = step
                step.call_id = found.call_id

    def run(self, found: RunFound) -> None:
        """A tool's run: it gives its call its times, its error and (where the messages had none) its
        result and arguments; a run that matches no call is a step of its own."""
        step = self._match("run", found.call_id, found.name, lambda s: not s.ran and not s.earlier_turn)
        if step is None or step.ran:
            step = self.add(PairedStep(found.name, found.call_id, found.arguments))
        step.ran, step.start_ns, step.end_ns = True, found.start_ns, found.end_ns
        step.error = step.error or found.error
        if step.result is None:
            step.result = found.result
            step.not_text = found.not_text if found.result is None else None
        if step.arguments is None:
            step.arguments = found.arguments

    def flags(self) -> list[str]:
        """A flag for each result that answered no call: where it was and the call id it named."""
        return [
            f"{FLAG_RESULT_WITHOUT_CALL}: {s.stray} (call id {s.call_id!r}) answers no earlier call"
            for s in self.steps
            if s.stray is not None
        ]


class _HasCallId(Protocol):
    @property
    def call_id(self) -> str | None: ...


S = TypeVar("S", bound=_HasCallId)


def merge_given(given: Sequence[S], read: Sequence[S]) -> list[S]:
    """Steps given directly, then those read from messages whose call id none of them has (a call given
    both ways is the given step)."""
    if not given:
        return list(read)
    ids = {s.call_id for s in given if s.call_id is not None}
    return [*given, *(s for s in read if s.call_id is None or s.call_id not in ids)]


def _loads(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        ok, parsed = json_value(value)
        return parsed if ok else value
    return value


def _same(a: Any, b: Any) -> bool:
    """Two tool calls' arguments are the same (JSON text or parsed)."""
    return _loads(a) == _loads(b) if isinstance(a, str) or isinstance(b, str) else a == b
