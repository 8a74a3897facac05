"""The OTLP reader when its input is malformed or a rebalance cuts in: every export request ends in
interactions or a dead letter with its reason and is acked, so its partition moves on; a request
redelivered after a rebalance is acked only once its own calls are out; pieces without trace and span
ids are never joined by their empty ids. The broker is a fake topic, time a ManualClock: everything
between is the worker's own code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import pytest
from pydantic_core import PydanticSerializationError

from pipeline.clock import ManualClock
from pipeline.otlp import read_batch
from pipeline.privacy.detect import Span
from pipeline.privacy.mask import Masker, PrivacyGuard
from schemas.deadletter import DeadLetter
from schemas.settings import PrivacySettings
from streams.acks import OrderedAcks, Ticket
from streams.processors.holding import HoldingProcessor
from streams.task_pool import TaskPool
from streams.testing import Event, Stream, Topic
from tests.fixtures.otlp import DETAILS, kv, logs
from tests.fixtures.otlp_reader import HOLD_S, rig


class GatedTopic(Topic):
    """A topic whose sends wait until ``gate`` is set (a send in flight during a rebalance)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        await self.gate.wait()
        return await super().send(key=key, value=value)


def chat_span(trace: str, span: str, *extra: dict[str, Any], content: bool = True) -> dict[str, Any]:
    attrs = kv({"gen_ai.operation.name": "chat"})
    if content:
        attrs += kv({
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Where is the key?"}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "By the door."}]),
        })  # fmt: skip
    return {"traceId": trace, "spanId": span, "name": "chat", "startTimeUnixNano": "1795430001000000000",
            "attributes": [*attrs, *extra]}  # fmt: skip


def request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": list(spans)}]}]}


T1, T2, T3 = "a1" * 16, "a2" * 16, "a3" * 16
S1, S2 = "b1" * 8, "b2" * 8


@pytest.mark.parametrize(
    "bad",
    [
        {"intValue": None},
        {"arrayValue": [{"stringValue": "x"}]},
        {"arrayValue": {"values": None}},  # (null values: an empty array, not an error)
        {"kvlistValue": {"values": ["x"]}},
        "a string, not an AnyValue",
    ],
)
async def test_a_malformed_attribute_is_a_dead_letter_and_the_partition_moves_on(bad: Any) -> None:
    r = rig()
    topic = r.ctx.names.otlp
    broken = request(chat_span(T1, S1, {"key": "odd", "value": bad}))
    events = [r.event(topic, 0, broken), r.event(topic, 1, request(chat_span(T2, S1))),
              r.event(topic, 2, request(chat_span(T3, S1)))]  # fmt: skip
    for event in events:
        await r.handle(event)
    await r.otlp.pool.drain()
    assert sorted(r.acked) == [(topic, 0), (topic, 1), (topic, 2)]  # nothing left blocking the partition
    letters = r.letters()
    if bad == {"arrayValue": {"values": None}}:
        assert len(r.interactions()) == 3 and letters == []
        return
    assert len(r.interactions()) == 2
    [letter] = letters
    assert letter.stage == "otlp" and "'odd'" in letter.error


async def test_an_unexpected_failure_in_handling_is_dead_lettered_and_acked() -> None:
    """The consume loop's last resort: a handler that raises what nobody expected (a bug) gets the
    message dead-lettered with the error, and acked; the loop goes on with the next message."""
    ctx = rig().ctx

    class Failing(HoldingProcessor):
        name, stage = "groundwatch.failing", "join"

        def __init__(self) -> None:
            self.ctx, self.clock, self.acks, self.pool = ctx, ManualClock(), OrderedAcks(), TaskPool(4)
            self.handled: list[int] = []

        inputs = property(lambda self: ["x"])
        hold_s = property(lambda self: 1.0)

        async def handle(self, event: Any, ticket: Ticket) -> None:
            if event.message.offset == 0:
                raise KeyError("a bug")
            self.handled.append(event.message.offset)
            self.acks.done(ticket)

        async def expire_due(self) -> int:
            return 0

        def forget(self, tps: Iterable[Any]) -> int:
            return 0

    acked: list[tuple[str, int]] = []
    processor = Failing()
    await processor.consume(Stream([Event.at("x", 0, b"{}", acked), Event.at("x", 1, b"{}", acked)]))
    assert acked == [("x", 0), ("x", 1)] and processor.handled == [1]
    letters = ctx.topics[ctx.names.deadletter]
    assert isinstance(letters, Topic)
    [letter] = [DeadLetter.model_validate_json(v) for v in letters.sent]
    assert letter.stage == "join" and "a bug" in letter.error


async def test_a_request_redelivered_after_a_rebalance_is_acked_only_once_its_own_calls_are_out() -> None:
    """R holds c1 (its send in flight) and c2 (waiting for its log records). The partition is lost and
    assigned back, R is redelivered: the first delivery's c1 completing must not ack the second R while
    its c2 is held, and expiring the calls later raises nothing."""
    r = rig()
    gated = r.ctx.topics[r.ctx.names.interactions] = GatedTopic()
    topic = r.ctx.names.otlp
    two_calls = request(chat_span(T1, S1), chat_span(T1, S2, content=False))
    first = r.event(topic, 0, two_calls)
    await r.handle(first)
    tp = first.message.tp
    r.otlp.acks.forget([tp])
    r.otlp.forget([tp])  # the rebalance (streams.revoke)
    await r.handle(r.event(topic, 0, two_calls))  # redelivered
    gated.gate.set()  # the first delivery's c1 goes out
    await r.otlp.pool.drain()
    assert r.acked == []  # c2 of the second delivery is still held
    r.otlp.clock.advance(HOLD_S)  # type: ignore[attr-defined]
    assert await r.otlp.expire_due() == 1
    await r.otlp.pool.drain()
    assert r.acked == [(topic, 0)]
    [letter] = r.letters()
    assert letter.interaction_id == f"{T1}:{S2}" and "no message content" in letter.error


async def test_passages_held_across_a_rebalance_expire_without_error() -> None:
    r = rig()
    gated = r.ctx.topics[r.ctx.names.interactions] = GatedTopic()
    topic = r.ctx.names.otlp
    retrieval = {"traceId": T1, "spanId": S2, "name": "retrieve", "attributes": kv({
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.content": "The key hangs by the door.",
    })}  # fmt: skip
    with_passage = request(retrieval, chat_span(T1, S1))
    first = r.event(topic, 0, with_passage)
    await r.handle(first)
    r.otlp.acks.forget([first.message.tp])
    r.otlp.forget([first.message.tp])
    await r.handle(r.event(topic, 0, with_passage))
    gated.gate.set()
    await r.otlp.pool.drain()
    r.otlp.clock.advance(HOLD_S)  # type: ignore[attr-defined]
    await r.otlp.expire_due()  # (raised KeyError when a forgotten ticket was let go)
    await r.otlp.pool.drain()
    assert r.acked == [(topic, 0)]


def test_pieces_without_ids_are_never_joined_by_their_empty_ids() -> None:
    """Log records emitted outside any span carry no trace or span id: a details event holds a whole
    call and becomes one of its own; a per-message event cannot be joined and says why."""
    lone = logs(DETAILS, ("gen_ai.user.message", {}, {"content": "Which battery?"}))
    for record in lone["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        record["traceId"], record["spanId"] = "", "0" * 16
    other = json.loads(json.dumps(lone))
    other["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["timeUnixNano"] = "1795430009000000000"
    batch, again = read_batch(lone), read_batch(other)
    [details], [user] = batch.records, batch.unjoinable
    assert details.trace_id == "" and details.span_id.startswith("record-")
    assert details.span_id == read_batch(lone).records[0].span_id  # the same for every delivery
    assert again.records[0].span_id != details.span_id  # another call: its own key
    assert "without trace and span ids" in user.reason and user.name == "gen_ai.user.message"


async def test_a_record_without_ids_is_dead_lettered_with_its_reason_and_acked() -> None:
    r = rig()
    topic = r.ctx.names.otlp_logs
    lone = logs(DETAILS, ("gen_ai.user.message", {}, {"content": "Which battery?"}))
    for record in lone["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        record.pop("traceId"), record.pop("spanId")
    await r.handle(r.event(topic, 0, lone))
    await r.otlp.pool.drain()
    [chat] = r.interactions()
    assert chat.interaction_id.startswith(":record-") and chat.answer == "8 years."
    [letter] = r.letters()
    assert letter.stage == "otlp" and "gen_ai.user.message" in letter.error
    assert r.acked == [(topic, 0)]


def test_a_call_without_any_time_says_so() -> None:
    from pipeline.otlp import CallError, convert_trace
    from pipeline.otlp_join import OtlpBuffer

    span = chat_span(T1, S1)
    span["startTimeUnixNano"] = "0"
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=False, at_once=False)
    buffer.add(read_batch(request(span)), None, 0.0)
    [ready] = buffer.drain()
    [result] = convert_trace(ready.trace).errors
    assert isinstance(result, CallError) and "no time" in result.reason


async def test_a_trace_whose_calls_only_asked_for_tools_is_counted_acked_and_never_a_dead_letter() -> None:
    r = rig()
    asked = kv({
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Where is order 42?"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "call_1", "name": "get_order", "arguments": {"order_id": "42"}}]}]),
    })  # fmt: skip
    span = {"traceId": T1, "spanId": S1, "name": "chat", "startTimeUnixNano": "1795430001000000000",
            "endTimeUnixNano": "1795430002000000000", "attributes": asked}  # fmt: skip
    await r.handle(r.event(r.ctx.names.otlp, 0, request(span)))  # a root span: the trace is complete
    assert r.interactions() == [] and r.letters() == []
    assert r.acked == [(r.ctx.names.otlp, 0)]
    assert r.ctx.metrics.otlp_steps.labels("no")._value.get() == 1


EMAIL = "mira.kowalski@northwind-mail.com"


class EmailOnly:
    """A detector that finds one address (Presidio stands behind this interface in the worker)."""

    def detect(self, text: str) -> list[Span]:
        i = text.find(EMAIL)
        return [] if i < 0 else [Span(i, i + len(EMAIL), "EMAIL_ADDRESS", 1.0)]


class Unwritable(Topic):
    """The interactions topic when the interaction cannot be written out (what ``encode`` raises)."""

    async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        self.tried += 1
        raise PydanticSerializationError("Error serializing to JSON: Maximum serialization depth exceeded")


@pytest.mark.parametrize("unwritable", [False, True])
async def test_an_interaction_that_cannot_be_sent_is_dead_lettered_masked_in_mode_all(
    unwritable: bool,
) -> None:
    """A broker that refuses is retried ``deadletter_attempts`` times; an interaction that cannot be
    written out is dead-lettered at once (no retry can write it). Either way, in ``privacy.mode`` all the
    letter's interaction to replay is the masked one."""
    r = rig(PrivacyGuard(PrivacySettings(mode="all"), Masker(EmailOnly())))
    name = r.ctx.names.interactions
    if unwritable:
        r.ctx.topics[name] = Unwritable()
    else:
        r.ctx.topics[name].fail = True  # type: ignore[union-attr]
    said = [{"role": "user", "content": f"I am {EMAIL}, where is my order?"}]
    span = chat_span(T1, S1, content=False)
    span["attributes"] += kv({
        "gen_ai.input.messages": json.dumps(said),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Shipped."}]),
    })  # fmt: skip
    await r.handle(r.event(r.ctx.names.otlp, 0, request(span)))
    await r.otlp.pool.drain()
    topic = r.ctx.topics[name]
    assert isinstance(topic, Topic)
    assert topic.tried == (1 if unwritable else r.ctx.settings.kafka.deadletter_attempts)
    [letter] = r.letters()
    assert letter.error_type == ("PydanticSerializationError" if unwritable else "ConnectionError")
    assert letter.original is not None and "<EMAIL" in letter.original
    assert EMAIL not in letter.model_dump_json()
