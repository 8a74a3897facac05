"""One pairing rule for tool calls and results: the same conversation gives the same steps as chat
``messages`` (OpenAI's format or GenAI parts) and as OpenTelemetry.

The recorded exports in tests/fixtures/otlp_agents/ (each framework and instrumentation) are read as the
worker reads them; the answering model call's own input messages, written back as chat messages in both
layouts, must give the very steps the trace gave. A hand-made conversation covers what the recordings do
not: parallel calls of one name, a result recorded under another id than its call, a legacy function, a
call whose result never came and a result that answers no call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.otlp import Message, convert_trace, messages, read_batch, record_messages
from pipeline.otlp.model import ROLES
from pipeline.otlp_join import OtlpBuffer
from schemas.interaction import Interaction
from schemas.tool_pairing import CallFound, ResultFound, StepPairing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp_agents"
RECORDED = sorted(p.stem for p in FIXTURES.glob("*.jsonl"))


def _steps(interaction: Interaction) -> list[tuple[Any, ...]]:
    """What pairing decides of each step (a tool span adds its times, which messages do not carry)."""
    return [(s.name, s.call_id, s.arguments, s.result, s.status, s.earlier_turn) for s in interaction.steps]


def _traces(name: str) -> list[tuple[Interaction, list[Message]]]:
    """Each interaction of a recorded export, with the input messages of the model call that answered."""
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=True, at_once=False)
    for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines():
        if line:
            buffer.add(read_batch(json.loads(line)), None, 0.0)
    out = []
    for ready in buffer.drain():
        for interaction in convert_trace(ready.trace).interactions:
            call = ready.trace.calls[interaction.interaction_id.split(":")[1]]
            inputs, _ = messages(call.span.attrs) if call.span else ([], [])
            if not inputs:
                inputs, _ = record_messages(call.records)
            out.append((interaction, inputs))
    return out


def _arguments(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def as_openai(inputs: list[Message]) -> list[dict[str, Any]]:
    """Messages in OpenAI's chat format: tool_calls on the assistant turn, a tool turn per result."""
    out: list[dict[str, Any]] = []
    for m in inputs:
        role = ROLES.get(m.role.strip().lower())
        if role is not None and (m.text.strip() or m.tool_calls):
            turn: dict[str, Any] = {"role": role, "content": m.text or None}
            if m.tool_calls:
                turn["tool_calls"] = [
                    {"id": c.call_id, "type": "function",
                     "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
                    for c in m.tool_calls
                ]  # fmt: skip
            out.append(turn)
        for r in m.tool_results:
            out.append({"role": "tool", "tool_call_id": r.call_id, "name": r.name, "content": r.result or ""})
    return out


def as_parts(inputs: list[Message]) -> list[dict[str, Any]]:
    """Messages as the GenAI conventions' parts, each under its own role (results under ``user`` when
    the export had them there, as Pydantic AI writes them)."""
    out: list[dict[str, Any]] = []
    for m in inputs:
        parts: list[dict[str, Any]] = [{"type": "text", "content": m.text}] if m.text else []
        parts += [{"type": "tool_call", "id": c.call_id, "name": c.name, "arguments": c.arguments}
                  for c in m.tool_calls]  # fmt: skip
        parts += [{"type": "tool_call_response", "id": r.call_id, "name": r.name, "result": r.result}
                  for r in m.tool_results]  # fmt: skip
        role = ROLES.get(m.role.strip().lower(), "tool")
        if parts and (role != "assistant" or m.text or m.tool_calls):
            out.append(
                {"role": role, "parts": [{k: v for k, v in p.items() if v is not None} for p in parts]}
            )
    return out


@pytest.mark.parametrize("layout", [as_openai, as_parts])
@pytest.mark.parametrize("name", RECORDED)
def test_each_recorded_export_gives_the_same_steps_as_its_conversation_in_messages(
    name: str, layout: Any
) -> None:
    traces = _traces(name)
    assert traces and all(i.steps for i, _ in traces)
    for interaction, inputs in traces:
        sent = Interaction.model_validate({
            "interaction_id": "m", "app": "a", "messages": layout(inputs), "answer": interaction.answer,
        })  # fmt: skip
        assert sent.question == interaction.question
        assert _steps(sent) == _steps(interaction)
        assert [f for f in sent.flags if "tool" in f] == [f for f in interaction.flags if "tool" in f]


# ---- a conversation the recordings do not show ---------------------------------------------------------
ASK = "Compare orders 7 and 8, and check the refund rule."
TURNS: list[dict[str, Any]] = [
    {"role": "user", "parts": [{"type": "text", "content": "Hello"}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "c0", "name": "whoami", "arguments": {}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c0", "result": "user 42"}]},
    {"role": "assistant", "parts": [{"type": "text", "content": "Hi, user 42."}]},
    {"role": "user", "parts": [{"type": "text", "content": ASK}]},
    {"role": "assistant", "parts": [
        {"type": "tool_call", "id": "fc_1", "name": "get_order", "arguments": {"order": 7}},
        {"type": "tool_call", "id": "fc_2", "name": "get_order", "arguments": {"order": 8}},
        {"type": "tool_call", "id": "c3", "name": "search_kb", "arguments": {"query": "refund"}},
        {"type": "tool_call", "id": "c4", "name": "get_carrier", "arguments": {"order": 7}},
    ]},
    # recorded under the call ids, the calls under their item ids: paired in order within the name
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "name": "get_order",
                                "result": {"order": 7, "status": "shipped"}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_2", "name": "get_order",
                                "result": {"order": 8, "error": "not found"}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c3", "result": "Refunds in 14 days."}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "zz", "result": "late"}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "yy", "result": "stray"}]},
]  # fmt: skip
EXPECTED = [
    ("whoami", "c0", {}, "user 42", "ok", True),
    ("get_order", "call_1", {"order": 7}, '{"order":7,"status":"shipped"}', "ok", False),
    ("get_order", "call_2", {"order": 8}, '{"order":8,"error":"not found"}', "error", False),
    ("search_kb", "c3", {"query": "refund"}, "Refunds in 14 days.", "ok", False),
    ("get_carrier", "zz", {"order": 7}, "late", "ok", False),  # the one call left open takes "zz"
    ("unknown", "yy", None, "stray", "ok", False),
]


def _kv(attrs: dict[str, str]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]


def _span_request(inputs: list[dict[str, Any]]) -> dict[str, Any]:
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Order 7 shipped; 8 is unknown."}]}]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
             "gen_ai.input.messages": json.dumps(inputs),
             "gen_ai.output.messages": json.dumps(answer)}  # fmt: skip
    span = {"traceId": "7" * 32, "spanId": "c" * 16, "name": "chat",
            "startTimeUnixNano": "1795430000000000000", "endTimeUnixNano": "1795430000500000000",
            "attributes": _kv(attrs)}  # fmt: skip
    return {"resourceSpans": [{"resource": {"attributes": _kv({"service.name": "bot"})},
                               "scopeSpans": [{"spans": [span]}]}]}  # fmt: skip


def test_a_hard_conversation_gives_the_same_steps_as_messages_and_as_a_span() -> None:
    sent = Interaction.model_validate({"interaction_id": "m", "app": "a", "messages": TURNS, "answer": "x"})
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=False, at_once=False)
    buffer.add(read_batch(_span_request(TURNS)), None, 0.0)
    [traced] = convert_trace(buffer.drain()[0].trace).interactions
    assert _steps(sent) == _steps(traced) == EXPECTED
    assert sent.question == traced.question == ASK
    stray = "tool_result_without_call: {} (call id 'yy') answers no earlier call"
    assert sent.flags == [stray.format("messages[10]")]
    assert traced.flags == [stray.format("input message 10")]


def test_legacy_functions_pair_by_name_in_order() -> None:
    turns = [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "function_call": {"name": "weather", "arguments": '{"c":"Oslo"}'}},
        {"role": "assistant", "function_call": {"name": "weather", "arguments": '{"c":"Rome"}'}},
        {"role": "function", "name": "weather", "content": "Oslo: 3C"},
        {"role": "function", "name": "weather", "content": "Rome: 14C"},
    ]  # fmt: skip
    sent = Interaction.model_validate({"interaction_id": "m", "app": "a", "messages": turns, "answer": "x"})
    assert [(s.arguments, s.result) for s in sent.steps] == [
        ({"c": "Oslo"}, "Oslo: 3C"),
        ({"c": "Rome"}, "Rome: 14C"),
    ]


def test_the_rule_pairs_ten_thousand_steps_in_linear_time() -> None:
    """10,000 calls of one name, their results under other ids and in order: each lookup resumes."""
    pairing = StepPairing()
    for i in range(10_000):
        pairing.call(CallFound(f"fc_{i}", "search", {"i": i}))
    for i in range(10_000):
        pairing.result(ResultFound(f"call_{i}", "search", str(i)))
    assert [(s.call_id, s.result) for s in pairing.steps[::2500]] == [
        ("call_0", "0"), ("call_2500", "2500"), ("call_5000", "5000"), ("call_7500", "7500"),
    ]  # fmt: skip
    assert pairing._cursor[("result", "search")] == 10_000 - 1
