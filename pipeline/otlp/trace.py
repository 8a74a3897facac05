"""A complete trace -> interactions: one per final answer (``convert_trace``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from pipeline.otlp.conventions import Call, messages, record_messages
from pipeline.otlp.model import (
    MODEL_KEYS,
    NO_CONTENT,
    NO_CONTENT_IN_RECORDS,
    ROLES,
    CallError,
    Message,
    Passage,
    SpanInfo,
    ToolSpan,
)
from pipeline.otlp.spans import CONVERSATION_KEYS
from schemas.interaction import Interaction
from schemas.settings import Limits
from schemas.tool_pairing import CallFound, PairedStep, StepPairing
from schemas.tools import FLAG_RESULT_NOT_TEXT
from schemas.validation import describe_validation_error


# ---- traces -> interactions --------------------------------------------------------------------------
@dataclass
class Trace:
    """The pieces of one trace held together: its model calls, tool spans, other spans and passages."""

    trace_id: str
    calls: dict[str, Call] = field(default_factory=dict)  # span id -> call
    tools: dict[str, ToolSpan] = field(default_factory=dict)  # span id -> tool span
    others: dict[str, SpanInfo] = field(default_factory=dict)  # span id -> any other span
    passages: list[Passage] = field(default_factory=list)
    root: bool = False  # a span without a parent came (an SDK exports the root span last)


@dataclass(frozen=True)
class TraceOutcome:
    """What a trace gives: its interaction (none when no model call answered in text), the model calls
    that cannot be mapped, and how many model calls were read as steps of the answer."""

    interactions: list[Interaction]
    errors: list[CallError]
    steps: int = 0


@dataclass(frozen=True)
class _Read:
    """A model call's messages, read from its span or its records."""

    call: Call
    inputs: list[Message]
    outputs: list[Message]

    @property
    def answer(self) -> str:
        return next((m.text for m in self.outputs if m.text.strip()), "")

    @property
    def asked(self) -> list[CallFound]:
        return [c for m in self.outputs for c in m.tool_calls]

    @property
    def start_ns(self) -> int:
        span = self.call.span
        return span.start_ns if span else min((r.time_ns for r in self.call.records), default=0)

    @property
    def end_ns(self) -> int:
        span = self.call.span
        return (
            (span.end_ns or span.start_ns) if span else max((r.time_ns for r in self.call.records), default=0)
        )


def conversation(inputs: list[Message]) -> list[dict[str, str]]:
    """A call's input messages as the interaction's ``messages``: roles mapped by ``ROLES``; turns of
    other roles and turns without text (tool calls and tool results, read as steps) left out."""
    out = []
    for m in inputs:
        mapped = ROLES.get(m.role.strip().lower())
        if mapped is not None and m.text.strip():
            out.append({"role": mapped, "content": m.text})
    return out


def _first(key: str, *sources: dict[str, Any]) -> Any:
    return next((s[key] for s in sources if s.get(key)), None)


def _read(call: Call) -> _Read:
    span_attrs = call.span.attrs if call.span else {}
    inputs, outputs = messages(span_attrs)
    if not inputs and not outputs:
        inputs, outputs = record_messages(call.records)
    return _Read(call, inputs, outputs)


def _is_question(m: Message) -> bool:
    """A user turn that asks something: not one that only carries tool results (Pydantic AI sends them
    as a ``user`` message of ``tool_call_response`` parts)."""
    return ROLES.get(m.role.strip().lower()) == "user" and not (m.tool_results and not m.text.strip())


def _steps(
    final: _Read, asked: list[_Read], answers: list[_Read], tools: list[ToolSpan], trace: Trace
) -> StepPairing:
    """The answer's steps, paired by ``schemas.tool_pairing``'s rule: the calls and results of its input
    messages, the calls the trace's tool-only calls asked for (perhaps the same calls under other ids),
    the tool spans, and the trace's other answers."""
    last_user = max((i for i, m in enumerate(final.inputs) if _is_question(m)), default=-1)
    steps = StepPairing()
    for i, m in enumerate(final.inputs):
        for found in m.tool_calls:
            steps.call(found, i < last_user, at=i)
        for result in m.tool_results:
            steps.result(replace(result, where=f"input message {i}"), i < last_user, at=i)
    for read in asked:
        for found in read.asked:
            steps.call(found, again=True)
    for tool in sorted(tools, key=lambda t: t.start_ns):
        steps.run(tool.run)
    answering = _agent_of(final.call, trace)
    for read in answers:  # another answer in the trace (a sub-agent's, a handoff's): a step, named by
        users = [m.text for m in read.inputs if _is_question(m)]  # its agent, else by its span
        agent = _agent_of(read.call, trace)
        name = agent.name if agent and agent != answering else read.call.name
        question = users[-1] if users else None
        steps.add(
            PairedStep(
                name, read.call.span_id, question, read.answer, start_ns=read.start_ns, end_ns=read.end_ns
            )
        )
    return steps


def _ancestors(span_id: str, trace: Trace) -> Iterator[SpanInfo]:
    """The other spans above a span, nearest first (model calls in between are passed through)."""
    seen: set[str] = set()
    call = trace.calls.get(span_id)
    info = trace.others.get(span_id)
    parent = call.span.parent_id if call and call.span else (info.parent_id if info else "")
    while parent and parent not in seen:
        seen.add(parent)
        if parent in trace.others:
            info = trace.others[parent]
            yield info
            parent = info.parent_id
        elif parent in trace.calls and trace.calls[parent].span is not None:
            parent = trace.calls[parent].span.parent_id  # type: ignore[union-attr]
        elif parent in trace.tools:
            parent = trace.tools[parent].parent_id
        else:
            return


def _agent_of(call: Call, trace: Trace) -> SpanInfo | None:
    return next((a for a in _ancestors(call.span_id, trace) if a.agent), None)


def _final(answers: list[_Read], trace: Trace) -> _Read:
    """The answer returned to the user: the call whose answer is the root agent's output (the outermost
    agent span of the trace; the last one, when several turns share the trace), else the last call that
    answered in text."""
    agents = [a for a in trace.others.values() if a.agent and a.output.strip()]
    outermost = [a for a in agents if not any(up.agent for up in _ancestors(a.span_id, trace))]
    if outermost:  # (several: a trace around several turns; the last turn's)
        root = max(outermost, key=lambda a: (a.start_ns, a.span_id))
        said = " ".join(root.output.split())
        for read in reversed(answers):
            text = " ".join(read.answer.split())
            if text == said:
                return read
        for read in reversed(answers):
            if said in " ".join(read.answer.split()):
                return read
    return answers[-1]


def _conversation_id(final: _Read, trace: Trace) -> str | None:
    span_attrs = final.call.span.attrs if final.call.span else {}
    record_attrs = [r.attrs for r in final.call.records]
    for key in CONVERSATION_KEYS:
        found = _first(key, span_attrs, *record_attrs)
        if found:
            return str(found)
    for info in [*_ancestors(final.call.span_id, trace), *trace.others.values()]:
        for key in CONVERSATION_KEYS:
            if info.ids.get(key):
                return info.ids[key]
    return None


def interaction(
    read: _Read,
    trace: Trace,
    steps: StepPairing,
    incomplete: bool,
    limits: Limits | None = None,
    passages: Sequence[Passage] = (),
) -> Interaction:
    """The interaction of the call that answered (its span's content, else its records'), with
    ``passages`` as its contexts; ValueError or ValidationError with the reason when it has none."""
    call, inputs, outputs = read.call, read.inputs, read.outputs
    if not any(m.text.strip() or m.tool_calls or m.tool_results for m in [*inputs, *outputs]):
        raise ValueError(NO_CONTENT_IN_RECORDS if call.records else NO_CONTENT)
    users = [m.text for m in inputs if _is_question(m)]
    if not users or not users[-1].strip():  # (an earlier user turn is not the question)
        raise ValueError("the model call has no user message")
    answer = read.answer
    if not answer:
        raise ValueError("the model call has no output message")
    span_attrs = call.span.attrs if call.span else {}
    record_attrs = [r.attrs for r in call.records]
    resource = call.span.resource if call.span else (call.records[0].resource if call.records else {})
    stamp_ns = read.start_ns
    if not stamp_ns:
        raise ValueError(
            "the model call has no time (the span's startTimeUnixNano, the records' timeUnixNano)"
        )
    model = next((m for k in MODEL_KEYS if (m := _first(k, span_attrs, *record_attrs))), "unknown")
    not_judged = dict(Counter(kind for m in [*inputs, *outputs] for kind in m.not_judged))
    metadata: dict[str, Any] = {
        "trace_id": call.trace_id,
        "span_name": call.name,
        "turns": len(inputs),
        "source": "span" if any(messages(span_attrs)) else "logs",
    }
    if not_judged:
        metadata["parts_not_judged"] = not_judged
    if incomplete:
        metadata["trace_incomplete"] = True  # held its time and judged with what came
    fields: dict[str, Any] = {
        "interaction_id": f"{call.trace_id}:{call.span_id}",
        "timestamp": datetime.fromtimestamp(stamp_ns / 1e9, tz=UTC),
        "app": str(resource.get("service.name") or "default"),
        "model": str(model),
        "conversation_id": _conversation_id(read, trace),
        "messages": conversation(inputs),
        "contexts": [{"text": p.text, "document": p.document} for p in passages],
        "answer": answer,
        "ground_truth": _first("groundwatch.ground_truth", span_attrs, *record_attrs),
        "metadata": metadata,
    }
    if steps.steps:
        fields["steps"] = [step.as_dict() for step in steps.steps]
        if flags := _step_flags(steps):
            fields["flags"] = flags
    return Interaction.model_validate(fields, context={"limits": limits} if limits else None)


def _step_flags(steps: StepPairing) -> list[str]:
    """What the steps say could not be used as given: a result that matched no call, a tool span's result
    that is not text."""
    return steps.flags() + [
        f"{FLAG_RESULT_NOT_TEXT}: steps[{i}] ({s.name}) held {s.not_text}"
        for i, s in enumerate(steps.steps)
        if s.not_text and s.result is None
    ]


def reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return describe_validation_error(exc)
    return str(exc)


def _error(call: Call, exc: Exception) -> CallError:
    return CallError(call.trace_id, call.span_id, call.name, reason(exc))


def _finals(answers: list[_Read], trace: Trace) -> list[_Read]:
    """The answers returned to the user, in time order: the trace's last (``_final``), and each earlier
    answer that a later call was given as an assistant turn of its history (a trace that spans several
    turns of a conversation: the app's session span around them)."""
    chosen = _final(answers, trace)
    said = {
        " ".join(m.text.split())
        for r in answers
        for m in r.inputs
        if ROLES.get(m.role.strip().lower()) == "assistant"
    }
    earlier = [
        r
        for r in answers
        if r is not chosen and r.end_ns <= chosen.start_ns and " ".join(r.answer.split()) in said
    ]
    return sorted([*earlier, chosen], key=lambda r: (r.end_ns, r.call.span_id))


def convert_trace(trace: Trace, incomplete: bool = False, limits: Limits | None = None) -> TraceOutcome:
    """One interaction per final answer. Of the trace's model calls that answered in text, those returned
    to the user (``_finals``) are interactions; the others (sub-agents, handoffs), the calls that only
    asked for tools, and the tool executions are steps of the first final answer that ends after they
    start, and the retrieved passages the contexts of that answer. A call with neither text nor tool
    calls is an error with the reason; a trace whose calls only asked for tools gives no interaction (a
    plain client's next call, a trace of its own, has the results in its input messages).
    ``incomplete``: the trace was held its time and is judged with what came. ``limits``: the steps and
    history cut to them (``max_steps``, ``max_tool_result_chars``...), as the worker sends it; without,
    as read."""
    reads = sorted((_read(call) for call in trace.calls.values()), key=lambda r: (r.start_ns, r.call.span_id))
    answers = [r for r in reads if r.answer.strip()]
    asked = [r for r in reads if not r.answer.strip() and r.asked]
    errors: list[CallError] = []
    for read in reads:
        if read in answers or read in asked:
            continue
        try:  # (raises: it has no answer)
            interaction(read, trace, StepPairing(), incomplete)
        except (ValueError, ValidationError) as exc:
            errors.append(_error(read.call, exc))
    if not answers:
        return TraceOutcome([], errors, len(asked))
    finals = _finals(answers, trace)
    others = [r for r in answers if all(r is not f for f in finals)]

    def owner(start_ns: int) -> _Read:
        return next((f for f in finals if f.end_ns >= start_ns), finals[-1])

    found: list[Interaction] = []
    for final in finals:
        mine = [r for r in asked if owner(r.start_ns) is final]
        sub = [r for r in others if owner(r.start_ns) is final]
        tools = [t for t in trace.tools.values() if owner(t.start_ns) is final]
        passages = [p for p in trace.passages if owner(p.start_ns) is final]
        try:
            steps = _steps(final, mine, sub, tools, trace)
            found.append(interaction(final, trace, steps, incomplete, limits, passages))
        except (ValueError, ValidationError) as exc:
            errors.append(_error(final.call, exc))
    return TraceOutcome(found, errors, len(asked) + len(others))
