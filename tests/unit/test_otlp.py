"""OpenTelemetry traces -> interactions: GenAI (JSON messages and indexed), OpenInference, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.otlp import Message, attribute_value, convert_trace, messages, read_batch
from pipeline.otlp_join import OtlpBuffer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "otlp_traces.jsonl"


def convert_request(*requests: dict[str, Any]) -> tuple[list, list]:
    """The interactions and errors of export requests read together (as ``groundwatch otlp`` does)."""
    buffer = OtlpBuffer(hold_s=float("inf"), traces=True, logs=True, at_once=False)
    for request in requests:
        buffer.add(read_batch(request), None, 0.0)
    interactions, errors = [], []
    for ready in buffer.drain():
        result = convert_trace(ready.trace)
        interactions += result.interactions
        errors += result.errors
    return interactions, errors


def converted() -> tuple[list, list]:
    return convert_request(*(json.loads(line) for line in FIXTURE.read_text().splitlines()))


def test_a_genai_chat_span_takes_its_traces_retrieved_passages_as_context() -> None:
    interactions, _ = converted()
    chat = next(i for i in interactions if i.app == "support-bot")
    assert chat.interaction_id == "a" * 32 + ":" + "2" * 16  # trace + span: a re-export is the same one
    assert chat.question == "How long is its warranty?"  # the last user turn
    assert chat.answer == "The B7 battery is covered for 8 years or 100,000 miles."
    assert chat.model == "gpt-4o-mini-2024-07-18" and chat.conversation_id == "conv-7"
    assert [(c.document, c.text[:6]) for c in chat.contexts] == [
        ("warranty.pdf", "The B7"),
        ("specs.pdf", "The X2"),
    ]
    assert chat.metadata["turns"] == 4 and chat.timestamp.year == 2026


def test_openllmetry_indexed_attributes_and_a_ground_truth() -> None:
    interactions, _ = converted()
    wiki = next(i for i in interactions if i.app == "wiki-bot")
    assert (wiki.question, wiki.answer, wiki.model) == (
        "Who wrote Hamlet?",
        "William Shakespeare wrote Hamlet.",
        "gpt-4o",
    )
    assert wiki.ground_truth == "William Shakespeare" and wiki.contexts == []


def test_a_model_call_without_an_answer_is_an_error_and_other_spans_are_ignored() -> None:
    interactions, errors = converted()
    assert len(interactions) == 2  # the HTTP span is neither a model call nor a retrieval
    assert [(e.name, e.reason) for e in errors] == [("llm", "the model call has no output message")]


def test_openinference_messages_and_any_values() -> None:
    attrs = {
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": "Hi?",
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Hello.",
    }  # fmt: skip
    assert messages(attrs) == (
        [Message("system", "Be brief."), Message("user", "Hi?")],
        [Message("assistant", "Hello.")],
    )
    assert attribute_value({"arrayValue": {"values": [{"intValue": "3"}, {"boolValue": True}]}}) == [3, True]
    assert messages({"input.value": "Q", "output.value": "A"}) == (
        [Message("user", "Q")],
        [Message("assistant", "A")],
    )


def test_the_earlier_messages_of_a_chat_span_are_its_history() -> None:
    interactions, _ = converted()
    chat = next(i for i in interactions if i.app == "support-bot")
    assert [(t.role, t.content) for t in chat.history] == [
        ("system", "Answer from the manual."),
        ("user", "Which battery does the X200 use?"),
        ("assistant", "The X200 uses the B7 lithium battery."),
    ]
    assert not chat.history_truncated


def span_request(attrs: dict[str, str]) -> dict[str, Any]:
    values = [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]
    chat = {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}
    span = {"traceId": "t" * 32, "spanId": "s" * 16, "name": "chat",
            "startTimeUnixNano": "1795430001000000000", "attributes": [chat, *values]}  # fmt: skip
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}


def test_roles_are_mapped_and_tool_turns_and_empty_turns_left_out() -> None:
    attrs = {
        "gen_ai.prompt.0.role": "developer", "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "human", "gen_ai.prompt.1.content": "Weather in Oslo?",
        "gen_ai.prompt.2.role": "assistant", "gen_ai.prompt.2.content": "",  # a tool call: no text
        "gen_ai.prompt.3.role": "tool", "gen_ai.prompt.3.content": '{"temp": 3}',
        "gen_ai.prompt.4.role": "ai", "gen_ai.prompt.4.content": "It is 3 degrees.",
        "gen_ai.prompt.5.role": "user", "gen_ai.prompt.5.content": "And tomorrow?",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Sunny, 5 degrees.",
    }  # fmt: skip
    (chat,), _ = convert_request(span_request(attrs))
    assert chat.question == "And tomorrow?" and chat.metadata["turns"] == 6
    assert [(t.role, t.content) for t in chat.history] == [
        ("system", "Be brief."),
        ("user", "Weather in Oslo?"),
        ("assistant", "It is 3 degrees."),
    ]


def test_a_blank_last_user_message_is_an_error_not_an_earlier_question() -> None:
    attrs = {
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Weather in Oslo?",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": " ",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Sunny.",
    }  # fmt: skip
    interactions, errors = convert_request(span_request(attrs))
    assert interactions == [] and [e.reason for e in errors] == ["the model call has no user message"]
