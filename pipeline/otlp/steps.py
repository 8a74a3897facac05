"""A final answer's tool steps, merged from every place they are recorded and each result paired with
its call (``Steps``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pipeline.otlp.model import ToolCall, ToolResult, ToolSpan
from pipeline.otlp.spans import loads


@dataclass
class Step:
    name: str
    call_id: str | None
    arguments: Any = None
    result: str | None = None
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0
    earlier_turn: bool = False
    span: bool = False  # a tool span was matched to it
    stray: bool = False  # a result that matched no call
    not_text: str | None = None  # its tool span recorded the result as a value that is not text

    def as_dict(self) -> dict[str, Any]:
        """The step as ``schemas.tools.ToolStep`` takes it (which parses JSON arguments and cuts what is
        over the limits); the status is given only for an error the span recorded, else the result
        decides it (none: ``no_result``; an error result: ``error``)."""
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


class Steps:
    """The tool steps of an answer, merged from every place they are recorded: the tool calls the model
    asked for and the results it was given (in its input messages, and in the outputs of the calls that
    only asked for tools), and the tool spans. A call and its result are paired by call id; a result
    (or tool span) whose id matches no call takes the first call of its name still without one, else
    the first call without one (some SDKs record an item id on the call and the call id on the result),
    else it is a step of its own. Each lookup resumes where the last one of its kind stopped (a step
    once given a result or a span keeps it), so 10,000 steps are merged in linear time."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.by_id: dict[str, Step] = {}
        self.by_name: dict[str, list[Step]] = {}
        self.claimed: set[int] = set()  # steps a call that only asked for tools was matched to
        self._cursor: dict[tuple[str, str | None], int] = {}

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        self.by_name.setdefault(step.name, []).append(step)
        if step.call_id:
            self.by_id.setdefault(step.call_id, step)
        return step

    def _first(self, kind: str, name: str | None, free: Any) -> Step | None:
        """The first step (of ``name``; None: of any name) for which ``free`` holds."""
        items = self.steps if name is None else self.by_name.get(name, [])
        at = self._cursor.get((kind, name), 0)
        while at < len(items) and not free(items[at]):
            at += 1
        self._cursor[(kind, name)] = at
        return items[at] if at < len(items) else None

    def call(self, found: ToolCall, earlier: bool, again: bool = False) -> None:
        """A tool call; ``again``: one already read from the answer's input messages, perhaps under another
        id (the same name and arguments, not yet claimed), when a call that only asked for tools says it."""
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
        self.add(Step(found.name, found.call_id, found.arguments, earlier_turn=earlier))

    def _match(self, kind: str, call_id: str | None, name: str | None, free: Any) -> Step | None:
        if call_id and call_id in self.by_id:
            return self.by_id[call_id]
        return (self._first(kind, name, free) if name else None) or self._first(kind, None, free)

    def result(self, found: ToolResult, earlier: bool) -> None:
        step = self._match("result", found.call_id, found.name, lambda s: s.result is None)
        if step is None:
            step = self.add(Step(found.name or "unknown", found.call_id, earlier_turn=earlier, stray=True))
        if step.result is None:
            step.result, step.error = found.result, step.error or found.error
            if found.call_id and step.call_id != found.call_id:  # (the call was recorded by item id)
                self.by_id[found.call_id] = step
                step.call_id = found.call_id

    def span(self, tool: ToolSpan) -> None:
        step = self._match("span", tool.call_id, tool.name, lambda s: not s.span and not s.earlier_turn)
        if step is None or step.span:
            step = self.add(Step(tool.name, tool.call_id, tool.arguments))
        step.span, step.start_ns, step.end_ns = True, tool.start_ns, tool.end_ns
        step.error = step.error or tool.error
        if step.result is None:
            step.result = tool.result
            step.not_text = tool.not_text if tool.result is None else None
        if step.arguments is None:
            step.arguments = tool.arguments


def _same(a: Any, b: Any) -> bool:
    """Two tool calls' arguments are the same (JSON text or parsed)."""
    return loads(a) == loads(b) if isinstance(a, str) or isinstance(b, str) else a == b
