"""Agent traces -> one interaction per final answer, the tool calls and results as its steps.

The fixtures in tests/fixtures/otlp_agents/ were recorded by tests/contract/agent_app.py (a two-turn
tool-calling support bot against the fake OpenAI server, each turn: a model call that only asks for the
``search_kb`` tool, the tool, a model call that answers) under each framework and instrumentation (a
file holds the traces, and the logs where the messages were recorded as log events); the
other traces here are built by hand for what the recordings do not show (errors, a lost result,
sub-agents, pieces arriving apart)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from groundwatch import cli
from pipeline.clock import ManualClock
from pipeline.otlp import convert_trace, read_batch
from pipeline.otlp_join import OtlpBuffer
from schemas.interaction import Interaction
from schemas.settings import Limits
from streams.codec import decode
from tests.fixtures.otlp import kv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp_agents"
RECORDED = sorted(p.stem for p in FIXTURES.glob("*.jsonl"))
QUESTIONS = ["Which battery does the X200 use?", "How long is its warranty?"]
DOCS = ["specs.pdf", "warranty.pdf"]


def requests(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line]


def convert(*batch: dict[str, Any]) -> tuple[list[Any], list[Any], int]:
    """Read export requests together as ``groundwatch otlp`` does: (interactions, errors, steps)."""
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=True, at_once=False)
    for request in batch:
        buffer.add(read_batch(request), None, 0.0)
    interactions, errors, steps = [], [], 0
    for ready in buffer.drain():
        outcome = convert_trace(ready.trace)
        interactions += outcome.interactions
        errors += outcome.errors
        steps += outcome.steps
    return sorted(interactions, key=lambda i: i.timestamp), errors, steps


def one_request_a_span(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Each span of a request in an export request of its own (as a BatchSpanProcessor may send them)."""
    out = []
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                one = {**resource, "scopeSpans": [{**scope, "spans": [span]}]}
                out.append({"resourceSpans": [one]})
    return out


@pytest.mark.parametrize("name", RECORDED)
def test_each_framework_gives_one_interaction_per_final_answer_with_its_tool_result(name: str) -> None:
    interactions, errors, steps = convert(*requests(name))
    assert errors == [] and steps == 2  # the two calls that only asked for the tool: steps, not letters
    assert [i.question for i in interactions] == QUESTIONS
    for interaction, doc in zip(interactions, DOCS, strict=True):
        [now] = [s for s in interaction.steps if not s.earlier_turn]
        assert (now.name, now.status, now.arguments) == ("search_kb", "ok", {"query": interaction.question})
        assert json.loads(now.result or "")[0]["id"] == doc
        assert now.call_id and now.started_at is not None  # the tool span and the messages joined
    assert [len(i.history) for i in interactions] == [1, 3]  # the system turn; then the first turn too
    assert len({i.conversation_id for i in interactions}) == 1


def test_langgraph_chain_spans_that_carry_messages_are_not_model_calls() -> None:
    batch = requests("openinference-langgraph")
    read = read_batch(batch[0])
    chains = [s for s in read.others.get(read.spans[0].trace_id, []) if s.name in ("agent", "LangGraph")]
    assert chains and len(read.spans) == 4  # four model calls (two a turn), however many chain spans


def test_pydantic_ai_tool_results_in_a_user_message_are_not_the_question() -> None:
    (_, second), _, _ = convert(*requests("pydantic-ai"))
    assert second.question == QUESTIONS[1]
    earlier = [s for s in second.steps if s.earlier_turn]
    assert [json.loads(s.result or "")[0]["id"] for s in earlier] == ["specs.pdf"]  # the first turn's


@pytest.mark.parametrize("name", ["openinference-langgraph", "pydantic-ai", "openllmetry-agents"])
def test_spans_arriving_one_request_each_are_held_until_the_root_span(name: str) -> None:
    pieces = [p for r in requests(name) for p in one_request_a_span(r)]
    roots = [p for p in pieces if not p["resourceSpans"][0]["scopeSpans"][0]["spans"][0].get("parentSpanId")]
    others = [p for p in pieces if p not in roots]
    random.Random(7).shuffle(others)
    clock = ManualClock()
    buffer = OtlpBuffer(hold_s=30, traces=True, logs=False)
    held = [buffer.add(read_batch(p), f"r{n}", clock.monotonic()) for n, p in enumerate(others)]
    assert all(ready == [] for ready in held) and buffer.released() == []
    ready = [r for p in roots for r in buffer.add(read_batch(p), "root", clock.monotonic())]
    interactions = [i for r in ready for i in convert_trace(r.trace).interactions]
    assert [i.question for i in sorted(interactions, key=lambda i: i.timestamp)] == QUESTIONS
    assert all(not i.metadata.get("trace_incomplete") for i in interactions)
    acked = [ticket for r in ready for ticket in buffer.settled(r)]
    assert sorted(acked) == sorted([f"r{n}" for n in range(len(others))] + ["root"])  # each once, after


TRACE = "7" * 32


def span(
    span_id: str, name: str, attrs: dict[str, Any], parent: str = "", start: int = 1, **extra: Any
) -> dict:
    return {"traceId": TRACE, "spanId": span_id, "parentSpanId": parent, "name": name,
            "startTimeUnixNano": str(1_795_430_000 * 10**9 + start * 10**6),
            "endTimeUnixNano": str(1_795_430_000 * 10**9 + start * 10**6 + 500_000),
            "attributes": kv(attrs), **extra}  # fmt: skip


def request(*spans: dict[str, Any]) -> dict[str, Any]:
    resource = {"attributes": kv({"service.name": "support-bot"})}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}


def chat(
    span_id: str, inputs: list[dict], outputs: list[dict], parent: str = "a" * 16, start: int = 1
) -> dict:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
             "gen_ai.input.messages": json.dumps(inputs),
             "gen_ai.output.messages": json.dumps(outputs)}  # fmt: skip
    return span(span_id, "chat", attrs, parent, start)


USER = {"role": "user", "parts": [{"type": "text", "content": "Where is order 7?"}]}
CALL = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_order",
                                         "arguments": {"order": 7}}]}  # fmt: skip
RESULT = {
    "role": "tool",
    "parts": [{"type": "tool_call_response", "id": "c1", "response": {"status": "shipped"}}],
}
ANSWER = {"role": "assistant", "parts": [{"type": "text", "content": "Order 7 has shipped."}]}
ROOT = span("a" * 16, "invoke_agent bot", {"gen_ai.operation.name": "invoke_agent",
                                            "gen_ai.conversation.id": "conv-9"}, start=0)  # fmt: skip


def test_a_tool_call_whose_result_never_came_is_judged_after_the_hold_and_says_so() -> None:
    clock = ManualClock()
    buffer = OtlpBuffer(hold_s=30, traces=True, logs=False)
    final = chat("c" * 16, [USER, CALL], [ANSWER], start=3)  # the tool's result is not in its input
    assert buffer.add(read_batch(request(chat("b" * 16, [USER], [CALL]), final)), "r1", 0.0) == []
    clock.advance(30)
    [ready] = buffer.expired(clock.monotonic())
    [interaction] = convert_trace(ready.trace, incomplete=ready.expired).interactions
    [step] = interaction.steps
    assert (step.name, step.call_id, step.status, step.result) == ("get_order", "c1", "no_result", None)
    assert interaction.metadata["trace_incomplete"] is True and interaction.conversation_id is None


def test_a_failed_tool_span_is_an_error_step_and_the_conversation_id_comes_from_the_agent() -> None:
    tool = span("d" * 16, "execute_tool get_order", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_order", "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.call.arguments": '{"order": 7}'}, "a" * 16, 2,
        status={"code": 2, "message": "timeout"})  # fmt: skip
    final = chat("c" * 16, [USER, CALL, RESULT], [ANSWER], start=3)
    (interaction,), errors, steps = convert(request(ROOT, chat("b" * 16, [USER], [CALL]), tool, final))
    [step] = interaction.steps
    assert (step.status, step.result, step.arguments) == ("error", '{"status":"shipped"}', {"order": 7})
    assert interaction.conversation_id == "conv-9" and errors == [] and steps == 1


def test_a_tool_span_whose_result_is_bytes_is_judged_without_it_and_flagged() -> None:
    tool = span("d" * 16, "execute_tool get_label", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_label", "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.call.arguments": '{"order": 7}'}, "a" * 16, 2)  # fmt: skip
    tool["attributes"].append({"key": "gen_ai.tool.call.result", "value": {"bytesValue": "iVBORw0KGgo="}})
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_label",
                                             "arguments": {"order": 7}}]}  # fmt: skip
    final = chat("c" * 16, [USER, call], [ANSWER], start=3)
    (interaction,), errors, _ = convert(request(ROOT, chat("b" * 16, [USER], [call]), tool, final))
    [step] = interaction.steps
    assert (step.name, step.result, step.status) == ("get_label", None, "no_result") and errors == []
    assert interaction.flags == ["tool_result_not_text: steps[0] (get_label) held bytes"]


def test_the_root_agents_answer_is_the_interaction_and_a_sub_agents_answer_a_step() -> None:
    root = copy.deepcopy(ROOT)
    root["attributes"] += kv({"gen_ai.output.messages": json.dumps([ANSWER])})
    sub = span("e" * 16, "invoke_agent orders", {"gen_ai.operation.name": "invoke_agent",
                                                  "gen_ai.agent.name": "orders"}, "a" * 16, 1)  # fmt: skip
    sub_answer = {"role": "assistant", "parts": [{"type": "text", "content": "Shipped on May 2."}]}
    later = {"role": "assistant", "parts": [{"type": "text", "content": "Anything else?"}]}
    calls = [chat("b" * 16, [USER], [sub_answer], "e" * 16, 2), chat("c" * 16, [USER], [ANSWER], start=3),
             chat("f" * 16, [USER], [later], start=4)]  # fmt: skip
    (interaction,), errors, steps = convert(request(root, sub, *calls))
    assert interaction.answer == "Order 7 has shipped." and interaction.interaction_id.endswith("c" * 16)
    assert [(s.name, s.result) for s in interaction.steps] == [
        ("orders", "Shipped on May 2."), ("chat", "Anything else?")
    ]  # fmt: skip
    assert steps == 2 and errors == []
    without_root_output = convert(request(ROOT, sub, *calls))[0][0]
    assert without_root_output.answer == "Anything else?"  # else the last


def test_ten_thousand_tool_spans_in_one_trace_are_judged_with_the_steps_capped() -> None:
    tools = [span(f"{n:016x}", "execute_tool lookup", {"gen_ai.operation.name": "execute_tool",
             "gen_ai.tool.name": "lookup", "gen_ai.tool.call.result": f"row {n}"}, "a" * 16, 1)
             for n in range(1, 10_001)]  # fmt: skip
    (interaction,), errors, _ = convert(request(ROOT, *tools, chat("c" * 16, [USER], [ANSWER], start=3)))
    assert errors == [] and len(interaction.steps) == 10_000
    sent = decode(interaction.model_dump_json(), Interaction, Limits())  # as the next stage reads it
    assert len(sent.steps) == Limits().max_steps and sent.steps[-1].result == "row 10000"
    assert any(flag.startswith("steps_dropped") for flag in sent.flags)
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=True, at_once=False)
    buffer.add(read_batch(request(ROOT, *tools, chat("c" * 16, [USER], [ANSWER], start=3))), None, 0.0)
    [worker] = convert_trace(buffer.drain()[0].trace, limits=Limits()).interactions  # as the worker sends it
    assert len(worker.steps) == Limits().max_steps and worker.flags == sent.flags


def test_a_tool_result_that_matches_no_call_and_a_result_under_role_user() -> None:
    stray = {"role": "user", "parts": [{"type": "tool_call_response", "id": "zz", "result": "42 items"}]}
    (interaction,), _, _ = convert(request(ROOT, chat("c" * 16, [stray, USER], [ANSWER], start=3)))
    [step] = interaction.steps
    assert (step.name, step.call_id, step.result, step.earlier_turn) == ("unknown", "zz", "42 items", True)
    assert interaction.question == "Where is order 7?"
    assert interaction.flags == [
        "tool_result_without_call: input message 0 (call id 'zz') answers no earlier call"
    ]


def test_groundwatch_otlp_fails_when_model_calls_give_no_interaction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(request(ROOT, chat("b" * 16, [USER], [CALL]))) + "\n")
    assert cli.main(["otlp", str(path)]) == 2
    err = capsys.readouterr().err
    assert "1 model calls read and no interaction" in err and "only tool calls" in err


@pytest.mark.parametrize("name", ["openai-v2", "pydantic-ai", "openinference-langgraph"])
def test_a_trace_around_a_whole_conversation_gives_one_interaction_a_turn(name: str) -> None:
    """The app's session span around both turns: one trace, two final answers (the first is the history
    of the second), each with the tool call of its own turn."""
    [request] = requests(name)
    session = span("5" * 16, "session", {"session.id": "conv-42"}, start=0)
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for item in scope["spans"]:
                item["traceId"] = TRACE
                item["parentSpanId"] = item.get("parentSpanId") or session["spanId"]
    request["resourceSpans"][0]["scopeSpans"][0]["spans"].append(session)
    interactions, errors, steps = convert(request)
    assert [i.question for i in interactions] == QUESTIONS and errors == [] and steps == 2
    for interaction, doc in zip(interactions, DOCS, strict=True):
        [now] = [s for s in interaction.steps if not s.earlier_turn]
        assert json.loads(now.result or "")[0]["id"] == doc and now.started_at is not None


async def test_the_worker_sends_one_interaction_a_trace_and_no_dead_letter_for_its_tool_only_call() -> None:
    from tests.fixtures.otlp_reader import rig

    r = rig()
    topic = r.ctx.names.otlp
    tool_only = request(chat("b" * 16, [USER], [CALL], start=1))
    final = request(chat("c" * 16, [USER, CALL, RESULT], [ANSWER], start=3))
    await r.handle(r.event(topic, 0, tool_only))
    await r.handle(r.event(topic, 1, final))
    await r.otlp.pool.drain()
    assert r.interactions() == [] and r.acked == []  # held: the root span has not come
    await r.handle(r.event(topic, 2, request(ROOT)))
    await r.otlp.pool.drain()
    [interaction] = r.interactions()
    assert interaction.answer == "Order 7 has shipped." and [s.name for s in interaction.steps] == [
        "get_order"
    ]
    assert r.letters() == [] and r.acked == [(topic, 0), (topic, 1), (topic, 2)]


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("traceloop.association.properties.session_id", {"traceloop.span.kind": "workflow"}),
        ("session.id", {"openinference.span.kind": "CHAIN"}),
        ("gen_ai.conversation.id", {"gen_ai.operation.name": "invoke_agent"}),
    ],
)
def test_the_conversation_id_is_found_on_a_span_above_the_call(key: str, kind: dict[str, str]) -> None:
    top = span("9" * 16, "turn", {key: "conv-3", **kind}, start=0)
    middle = span("a" * 16, "step", {"openinference.span.kind": "CHAIN"}, "9" * 16, 0)
    other = span("8" * 16, "elsewhere", {key: "not-this-one"}, start=9)  # another root of the trace
    (interaction,), _, _ = convert(request(top, middle, chat("c" * 16, [USER], [ANSWER], start=3), other))
    assert interaction.conversation_id == "conv-3"


@pytest.mark.parametrize("name", RECORDED)
def test_each_frameworks_tool_spans_alone_carry_the_result(name: str) -> None:
    """Without the model calls' messages, the tool spans still give each turn's result (every framework
    records it on the span; LangChain's serialised ToolMessage unwrapped to its content)."""
    [batch] = [read_batch(r) for r in requests(name) if "resourceSpans" in r]
    tools = sorted((t for ts in batch.tools.values() for t in ts), key=lambda t: t.start_ns)
    assert [t.name for t in tools] == ["search_kb", "search_kb"]
    assert [json.loads(t.result or "")[0]["id"] for t in tools] == DOCS
    assert not any(t.error for t in tools)


def test_a_later_turns_retrieved_passage_is_not_the_earlier_turns_context() -> None:
    """A session span around two turns, and a retrieval span in the second turn only: the first turn's
    answer is not judged against what was retrieved after it was given; the second turn's is."""
    [request] = requests("openai-v2")
    session = span("5" * 16, "session", {"session.id": "conv-42"}, start=0)
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for item in scope["spans"]:
                item["traceId"] = TRACE
                item["parentSpanId"] = item.get("parentSpanId") or session["spanId"]
    last_start = max(int(s["startTimeUnixNano"]) for s in spans)
    documents = json.dumps([{"id": "later.pdf", "content": "LATER TURN TEXT"}])
    retrieval = span("6" * 16, "retrieval", {"gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.documents": documents}, session["spanId"])  # fmt: skip
    retrieval["startTimeUnixNano"] = str(last_start - 1)  # inside the second turn, after the first answer
    spans.extend([session, retrieval])
    interactions, errors, _ = convert(request)
    assert [i.question for i in interactions] == QUESTIONS and errors == []
    first, second = interactions
    assert [p.text for p in first.contexts] == []
    assert [(p.text, p.document) for p in second.contexts] == [("LATER TURN TEXT", "later.pdf")]


def test_one_rule_says_what_a_span_is() -> None:
    from pipeline.otlp import span_kind

    cases = {
        "model": [
            {"openinference.span.kind": "LLM"}, {"gen_ai.operation.name": "chat"},
            {"gen_ai.operation.name": "generate_content"}, {"gen_ai.input.messages": "[]"},
            {"llm.input_messages.0.message.role": "user"},
        ],
        "tool": [
            {"gen_ai.operation.name": "execute_tool"}, {"openinference.span.kind": "TOOL"},
            {"traceloop.span.kind": "tool", "gen_ai.input.messages": "[]"},
        ],
        "agent": [
            {"gen_ai.operation.name": "invoke_agent"}, {"openinference.span.kind": "AGENT"},
            {"traceloop.span.kind": "workflow", "gen_ai.prompt.0.content": "hi"},
        ],
        "retrieval": [{"gen_ai.operation.name": "retrieval"}, {"openinference.span.kind": "RETRIEVER"}],
        "other": [{}, {"openinference.span.kind": "CHAIN", "llm.input_messages.0.message.role": "user"}],
    }  # fmt: skip
    assert {kind: [span_kind(a) for a in attrs] for kind, attrs in cases.items()} == {
        kind: [kind] * len(attrs) for kind, attrs in cases.items()
    }
