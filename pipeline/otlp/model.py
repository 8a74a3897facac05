"""What is read from OTLP: the constants of the conventions and the shapes a trace's pieces take."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schemas.tool_pairing import CallFound, ResultFound, RunFound

MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
#: span message roles -> the interaction's turn roles; other roles (tool, function) are not conversation
ROLES = {
    "user": "user",
    "human": "user",
    "": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
    "developer": "system",
}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
#: semantic conventions 1.30: one event per input message (its role from the name) and per choice
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
GENAI_EVENTS = (DETAILS_EVENT, CHOICE_EVENT, *MESSAGE_EVENTS)
NO_CONTENT = (
    "no message content on the span (content capture is off, or it was recorded as log events: "
    "export logs too)"
)
NO_CONTENT_IN_RECORDS = (
    "no message content on the span nor in its log records (content capture is off in the instrumentation)"
)


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    not_judged: tuple[str, ...] = ()  # the kinds of the parts that are not text nor tools (image_url...)
    tool_calls: tuple[CallFound, ...] = ()
    tool_results: tuple[ResultFound, ...] = ()


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    name: str
    start_ns: int
    resource: dict[str, Any]
    attrs: dict[str, Any]
    parent_id: str = ""
    end_ns: int = 0


@dataclass(frozen=True)
class ToolSpan:
    """A tool execution recorded as a span of its own (GenAI ``execute_tool``, an OpenInference TOOL
    span, an OpenLLMetry ``tool`` span)."""

    span_id: str
    parent_id: str
    name: str
    call_id: str | None
    arguments: Any
    result: str | None
    error: bool
    start_ns: int
    end_ns: int
    not_text: str | None = None  # the kind of a result recorded as a value that is not text (``bytes``)

    @property
    def run(self) -> RunFound:
        return RunFound(self.call_id, self.name, self.arguments, self.result, self.error,
                        self.start_ns, self.end_ns, self.not_text)  # fmt: skip


@dataclass(frozen=True)
class SpanInfo:
    """What is kept of a trace's other spans: its place in the tree, the conversation ids it carries,
    and, for an agent (``invoke_agent``, OpenInference AGENT, OpenLLMetry agent or workflow), its output."""

    span_id: str
    parent_id: str
    name: str
    start_ns: int
    ids: dict[str, str]
    agent: bool = False
    output: str = ""


@dataclass(frozen=True)
class Record:
    """A GenAI event (log record) of a model call."""

    trace_id: str
    span_id: str
    event: str
    time_ns: int
    resource: dict[str, Any]
    attrs: dict[str, Any]
    body: Any


@dataclass(frozen=True)
class Passage:
    """One retrieved passage, with its retrieval span's start and parent (0 and "" where unknown): the
    start places it in its turn (``convert_trace``)."""

    text: str
    document: str | None
    start_ns: int = 0
    parent_id: str = ""


@dataclass(frozen=True)
class Batch:
    """What one export request (traces or logs) holds: model calls' spans and records, tool spans, the
    other spans' place in their trace, and passages."""

    spans: list[Span]
    records: list[Record]
    passages: dict[str, list[Passage]]  # trace id -> passages of its retrieval spans
    read: int = 0  # spans and log records of any kind in the request
    #: model-call pieces that cannot be joined to their call (no trace and span ids), with the reason
    unjoinable: list[CallError] = field(default_factory=list)
    tools: dict[str, list[ToolSpan]] = field(default_factory=dict)  # trace id -> its tool spans
    others: dict[str, list[SpanInfo]] = field(default_factory=dict)  # trace id -> its other spans


@dataclass(frozen=True)
class CallError:
    trace_id: str
    span_id: str
    name: str
    reason: str
