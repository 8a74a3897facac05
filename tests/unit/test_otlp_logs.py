"""OpenTelemetry logs (GenAI events), content layouts, GenAI retrieval spans, and the hold of a model
call's pieces (pipeline.otlp_join) on an injected clock."""

from __future__ import annotations

import json
from typing import Any

from pipeline.clock import ManualClock
from pipeline.otlp import NO_CONTENT, CallError, content, convert_trace, messages, read_batch
from pipeline.otlp_join import OtlpBuffer
from tests.fixtures.otlp import DETAILS, RESOURCE, SPAN, TRACE, kv, logs


def spans(*items: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    out = [{"traceId": TRACE, "spanId": sid, "name": name, "startTimeUnixNano": "1795430001000000000",
            "attributes": kv(attrs)} for sid, name, attrs in items]  # fmt: skip
    return {"resourceSpans": [{"resource": RESOURCE, "scopeSpans": [{"spans": out}]}]}


CHAT = (SPAN, "chat gpt-4o-mini", {"gen_ai.operation.name": "chat", "gen_ai.response.model": "gpt-4o-mini"})
RETRIEVAL = ("ef" * 8, "retrieval manuals", {
    "gen_ai.operation.name": "retrieval",
    "gen_ai.retrieval.documents": json.dumps([
        {"id": "warranty.pdf", "score": 0.9, "content": "The B7 battery is covered for 8 years."},
        {"id": "specs.pdf", "score": 0.8},  # the specification's minimum: no text to judge against
    ]),
})  # fmt: skip
EVENTS_130 = [
    ("gen_ai.system.message", {}, {"content": "Answer from the manual."}),
    ("gen_ai.user.message", {}, {"content": "Which battery?"}),
    ("gen_ai.assistant.message", {}, {"content": "The B7."}),
    ("gen_ai.user.message", {}, {"content": [{"type": "text", "text": "How long is its warranty?"}]}),
    ("gen_ai.choice", {}, {"index": 0, "message": {"role": "assistant", "content": "8 years."}}),
]


def read_all(*requests: dict[str, Any]) -> list[Any]:
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=True, at_once=False)
    for request in requests:
        buffer.add(read_batch(request), None, 0.0)
    return [one(r) for r in buffer.drain()]


def one(ready: Any) -> Any:
    """The interaction of a ready trace of one model call, or its error."""
    result = convert_trace(ready.trace, incomplete=ready.expired)
    [found] = result.interactions or result.errors
    return found


def test_every_content_layout_gives_the_text_and_notes_what_is_not_text() -> None:
    assert content("plain") == ("plain", ())
    assert content([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}]) == (
        "a",
        ("image_url",),
    )
    assert content('[{"type": "text", "text": "from a JSON string"}]') == ("from a JSON string", ())
    assert content("[1, 2] is a list in prose") == ("[1, 2] is a list in prose", ())
    assert content({"parts": [{"type": "text", "content": "genai part"}]}) == ("genai part", ())
    openinference = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "Hi?",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Hello.",
    }
    inputs, outputs = messages(openinference)
    assert (inputs[0].text, inputs[0].not_judged, outputs[0].text) == ("Hi?", ("image",), "Hello.")
    structured = {
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Q"}]}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "A"}]}],
        "gen_ai.system_instructions": "Be brief.",
    }
    inputs, outputs = messages(structured)
    assert [(m.role, m.text) for m in inputs] == [("system", "Be brief."), ("user", "Q")]


def test_semconv_130_events_joined_to_their_span_and_the_genai_retrieval_passages() -> None:
    (chat,) = read_all(spans(CHAT, RETRIEVAL), logs(*EVENTS_130))
    assert (chat.question, chat.answer, chat.app, chat.model) == (
        "How long is its warranty?", "8 years.", "support-bot", "gpt-4o-mini"
    )  # fmt: skip
    assert [(t.role, t.content) for t in chat.history] == [
        ("system", "Answer from the manual."), ("user", "Which battery?"), ("assistant", "The B7.")
    ]  # fmt: skip
    assert [(c.document, c.text) for c in chat.contexts] == [
        ("warranty.pdf", "The B7 battery is covered for 8 years.")
    ]
    assert chat.interaction_id == f"{TRACE}:{SPAN}" and chat.metadata["source"] == "logs"


def test_a_details_event_alone_takes_the_app_from_its_resource_and_the_model_from_the_record() -> None:
    (chat,) = read_all(logs(DETAILS))
    assert (chat.question, chat.answer, chat.app, chat.model) == (
        "How long is its warranty?", "8 years.", "support-bot", "gpt-4o-mini"
    )  # fmt: skip
    assert [(t.role, t.content) for t in chat.history] == [("system", "Answer from the manual.")]
    assert chat.metadata["parts_not_judged"] == {"image_url": 1}


def test_a_span_without_content_and_without_records_says_why() -> None:
    (error,) = read_all(spans(CHAT))
    assert isinstance(error, CallError) and error.reason == NO_CONTENT


def test_the_pieces_of_a_call_are_held_until_complete_and_the_request_acked_after_its_outcome() -> None:
    clock = ManualClock()
    buffer = OtlpBuffer(hold_s=30, traces=True, logs=True)
    assert buffer.add(read_batch(spans(CHAT, RETRIEVAL)), "traces#1", clock.monotonic()) == []
    assert buffer.released() == []  # its span waits for its records
    clock.advance(10)
    assert buffer.add(read_batch(logs(*EVENTS_130[:2])), "logs#1", clock.monotonic()) == []  # no choice yet
    clock.advance(10)
    (ready,) = buffer.add(read_batch(logs(*EVENTS_130[2:])), "logs#2", clock.monotonic())
    assert ready.held_s == 20 and not ready.expired and len(ready.trace.passages) == 1
    assert buffer.released() == []  # nothing acked before the outcome is out
    assert sorted(buffer.settled(ready)) == ["logs#1", "logs#2", "traces#1"]
    clock.advance(10)
    assert buffer.expired(clock.monotonic()) == [] and buffer.released() == []
    # a late copy of a record of that call is dropped, and its request acked at once
    assert buffer.add(read_batch(logs(EVENTS_130[0])), "logs#3", clock.monotonic()) == []
    assert buffer.released() == ["logs#3"] and buffer.dropped_late == 1


def test_after_the_hold_time_a_call_goes_out_with_what_came() -> None:
    clock = ManualClock()
    buffer = OtlpBuffer(hold_s=30, traces=True, logs=True)
    buffer.add(read_batch(logs(DETAILS)), "logs#1", clock.monotonic())  # waits for its span
    clock.advance(29.9)
    assert buffer.expired(clock.monotonic()) == []
    clock.advance(0.1)
    (ready,) = buffer.expired(clock.monotonic())
    assert ready.expired and one(ready).answer == "8 years."
    assert buffer.settled(ready) == ["logs#1"]


def test_incomplete_records_after_the_hold_time_are_an_error_with_the_reason() -> None:
    clock = ManualClock()
    buffer = OtlpBuffer(hold_s=5, traces=False, logs=True)
    assert buffer.add(read_batch(logs(*EVENTS_130[:4])), "logs#1", clock.monotonic()) == []
    clock.advance(5)
    (ready,) = buffer.expired(clock.monotonic())
    result = one(ready)
    assert isinstance(result, CallError) and result.reason == "the model call has no output message"


def test_without_logs_a_span_without_content_is_reported_at_once() -> None:
    buffer = OtlpBuffer(hold_s=30, traces=True, logs=False)
    (ready,) = buffer.add(read_batch(spans(CHAT)), "traces#1", 0.0)
    assert one(ready) == CallError(TRACE, SPAN, "chat gpt-4o-mini", NO_CONTENT)
    assert buffer.settled(ready) == ["traces#1"]


def test_without_traces_complete_records_go_out_at_once_and_a_rebalance_forgets_held_pieces() -> None:
    buffer = OtlpBuffer(hold_s=30, traces=False, logs=True)
    (ready,) = buffer.add(read_batch(logs(DETAILS)), ("p0", 1), 0.0)
    assert buffer.settled(ready) == [("p0", 1)]
    other = logs(*EVENTS_130[:2])
    other["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["spanId"] = "99" * 8
    other["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]["spanId"] = "99" * 8
    buffer.add(read_batch(other), ("p1", 7), 0.0)
    assert len(buffer) == 1 and buffer.forget({"p1"}, lambda held: held[0]) == 1 and len(buffer) == 0
    assert buffer.released() == []  # forgotten, not acked: it comes back to the worker that reads p1 now
