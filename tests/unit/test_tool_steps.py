"""Tool calls and results in an interaction: OpenAI's chat format with tools, legacy functions, the GenAI
semantic conventions' parts, steps given directly, what is flagged, what is refused, and the limits."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from schemas.errors import InvalidMessage
from schemas.interaction import Interaction, interaction_digest
from schemas.settings import Limits
from schemas.tools import ToolStep, is_error_result
from streams.codec import decode, encode

SYSTEM = {"role": "system", "content": "You are the support bot of Acme."}
ASK_ORDER = {"role": "user", "content": "Where is my order 4471?"}
ASK_REFUND = {"role": "user", "content": "How long do refunds take?"}


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(*items: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(items), "refusal": None}


def tool(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


TWO_TURNS = [
    SYSTEM,
    ASK_ORDER,
    calls(call("c1", "get_order", '{"order_id": "4471"}')),
    tool("c1", '{"status": "shipped", "carrier": "DHL"}'),
    {"role": "assistant", "content": "Your order 4471 shipped with DHL."},
    ASK_REFUND,
    calls(call("c2", "search_kb", {"query": "refund time"}), content="Let me look that up."),
    tool("c2", [{"type": "text", "text": "Refunds are paid within 14 days."}]),
]


def entered(data: dict[str, Any], limits: Limits | None = None) -> Interaction:
    """The interaction as a worker reads it off the topic (limits and wall clock in the context)."""
    return decode(json.dumps(data).encode(), Interaction, limits or Limits())


def event(**fields: Any) -> dict[str, Any]:
    return {"interaction_id": "t-1", "answer": "Refunds are paid within 14 days.", **fields}


def test_openai_chat_format_with_tools_becomes_question_history_and_steps() -> None:
    i = entered(event(messages=TWO_TURNS))
    assert i.question == ASK_REFUND["content"]
    assert [(t.role, t.content) for t in i.history] == [
        ("system", SYSTEM["content"]),
        ("user", ASK_ORDER["content"]),
        ("assistant", "Your order 4471 shipped with DHL."),
    ]
    assert [(s.name, s.call_id, s.arguments, s.result, s.status, s.earlier_turn) for s in i.steps] == [
        ("get_order", "c1", {"order_id": "4471"}, '{"status": "shipped", "carrier": "DHL"}', "ok", True),
        ("search_kb", "c2", {"query": "refund time"}, "Refunds are paid within 14 days.", "ok", False),
    ]
    assert i.flags == []


def test_steps_survive_the_trip_between_stages_unchanged() -> None:
    i = entered(event(messages=TWO_TURNS))
    again = decode(i.model_dump_json().encode(), Interaction, Limits())
    assert again == i and interaction_digest(again) == interaction_digest(i)


def test_a_call_without_a_result_is_no_result_and_a_result_without_a_call_is_kept_and_flagged() -> None:
    answered = [calls(call("c1", "search_kb", "{}")), tool("c1", "Refunds take 14 days.")]
    i = entered(event(messages=[ASK_REFUND, *answered, tool("zz", "stray text")]))
    assert [(s.name, s.call_id, s.result, s.status) for s in i.steps] == [
        ("search_kb", "c1", "Refunds take 14 days.", "ok"),
        ("unknown", "zz", "stray text", "ok"),
    ]
    assert i.flags == ["tool_result_without_call: messages[3] (call id 'zz') answers no earlier call"]
    # a result whose id no call has takes the open call (some SDKs record an item id on the call and the
    # call id on the result), and its id
    i = entered(event(messages=[ASK_REFUND, calls(call("c1", "search_kb", "{}")), tool("c9", "x")]))
    assert [(s.name, s.call_id, s.result, s.status) for s in i.steps] == [("search_kb", "c9", "x", "ok")]
    assert i.flags == []
    i = entered(event(messages=[ASK_REFUND, calls(call("c1", "search_kb", "{}"))]))
    [step] = i.steps
    assert (step.name, step.call_id, step.result, step.status) == ("search_kb", "c1", None, "no_result")


def test_arguments_that_are_not_json_are_kept_as_the_string_and_flagged() -> None:
    i = entered(event(messages=[ASK_REFUND, calls(call("c1", "search_kb", "refund polic")), tool("c1", "x")]))
    assert i.steps[0].arguments == "refund polic"
    assert i.flags == ["arguments_not_json: steps[0] (search_kb)"]
    # JSON that is not an object stays the JSON text, unflagged; a blank string is no arguments
    i = entered(
        event(question="Q?", steps=[{"name": "a", "arguments": "[1, 2]"}, {"name": "b", "arguments": "  "}])
    )
    assert [s.arguments for s in i.steps] == ["[1, 2]", None] and i.flags == []


def test_a_result_with_parts_that_are_not_text_keeps_the_text_and_is_flagged() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    content = [{"type": "text", "text": "Photo of the parcel:"}, image]
    i = entered(event(messages=[ASK_ORDER, calls(call("c1", "photo", "{}")), tool("c1", content)]))
    assert i.steps[0].result == "Photo of the parcel:"
    assert i.flags == ["tool_result_not_text: messages[2] held image_url parts"]
    # nothing but an image: judged with no result
    i = entered(event(messages=[ASK_ORDER, calls(call("c1", "photo", "{}")), tool("c1", [image])]))
    assert i.steps[0].result is None and i.steps[0].status == "no_result"


def test_an_openai_sdk_dump_of_an_assistant_turn_is_read() -> None:
    dumped = {"role": "assistant", "content": None, "refusal": None, "annotations": [], "audio": None,
              "function_call": None, "tool_calls": [call("c1", "search_kb", '{"q": "x"}')]}  # fmt: skip
    earlier = {"role": "assistant", "content": None, "refusal": "I can't help with that.", "annotations": []}
    i = entered(event(messages=[ASK_ORDER, earlier, ASK_REFUND, dumped, tool("c1", "14 days")]))
    assert [(t.role, t.content) for t in i.history] == [
        ("user", ASK_ORDER["content"]),
        ("assistant", "I can't help with that."),
    ]
    assert [(s.name, s.result) for s in i.steps] == [("search_kb", "14 days")]


def test_a_tool_turns_json_object_content_is_kept_as_its_json_text() -> None:
    i = entered(
        event(messages=[ASK_ORDER, calls(call("c1", "get_order", "{}")), tool("c1", {"status": "late"})])
    )
    assert i.steps[0].result == '{"status":"late"}' and i.flags == []
    with pytest.raises(InvalidMessage, match=r"messages\.0\.content"):  # a user's content is text or parts
        entered(event(messages=[{"role": "user", "content": {"q": 1}}]))


def test_legacy_function_turns_pair_by_name() -> None:
    messages = [
        ASK_ORDER,
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_order", "arguments": '{"id": 4471}'},
        },
        {"role": "function", "name": "get_order", "content": "shipped"},
    ]
    i = entered(event(messages=messages))
    assert [(s.name, s.call_id, s.arguments, s.result) for s in i.steps] == [
        ("get_order", None, {"id": 4471}, "shipped")
    ]
    assert i.flags == []


def test_genai_semantic_convention_parts_and_pydantic_ai_results_under_user() -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": ASK_REFUND["content"]}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "k1", "name": "search_kb", "arguments": {"q": "refund"}}],
            "finish_reason": "tool_call",
        },
        # Pydantic AI writes the tool result as a user turn whose only part is a tool_call_response
        {
            "role": "user",
            "parts": [{"type": "tool_call_response", "id": "k1", "result": [{"content": "14 days"}]}],
        },
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "k2", "name": "get_policy"}]},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "k2", "response": "Refunds: 14 days."}],
        },
    ]
    i = entered(event(messages=messages))
    assert i.question == ASK_REFUND["content"] and i.history == []  # the result turn is no user turn
    assert [(s.name, s.call_id, s.arguments, s.result, s.earlier_turn) for s in i.steps] == [
        ("search_kb", "k1", {"q": "refund"}, '[{"content":"14 days"}]', False),
        ("get_policy", "k2", None, "Refunds: 14 days.", False),
    ]


def test_a_question_given_apart_from_the_messages_and_earlier_turns() -> None:
    # the messages hold an earlier, answered turn with its tool call: the call is of that turn
    earlier = [
        ASK_ORDER,
        calls(call("c1", "get_order", "{}")),
        tool("c1", "shipped"),
        {"role": "assistant", "content": "Shipped."},
    ]
    i = entered(event(question="And refunds?", messages=earlier))
    assert [s.earlier_turn for s in i.steps] == [True]
    # no user turn at all: the calls are the current question's
    i = entered(
        event(question="And refunds?", messages=[calls(call("c1", "search_kb", "{}")), tool("c1", "14 days")])
    )
    assert [s.earlier_turn for s in i.steps] == [False]


def test_steps_given_directly_keep_the_contract_and_merge_with_messages_by_call_id() -> None:
    started = "2026-11-26T10:00:00+01:00"
    given = [
        {"name": "search_kb", "call_id": "c2", "arguments": '{"query": "refund time"}',
         "result": {"documents": []}, "started_at": started, "duration_ms": 12.5},
        {"name": "ticket", "call_id": "t9", "status": "error", "result": "timeout"},
    ]  # fmt: skip
    i = entered(event(messages=TWO_TURNS, steps=given))
    assert [s.call_id for s in i.steps] == ["c2", "t9", "c1"]  # given first; c2 from messages not twice
    first = i.steps[0]
    assert first.arguments == {"query": "refund time"} and first.result == '{"documents":[]}'
    assert first.started_at == datetime(2026, 11, 26, 9, tzinfo=UTC) and first.duration_ms == 12.5
    assert i.steps[1].status == "error"


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (None, "no_result"),
        ("Refunds take 14 days.", "ok"),
        ('{"error": "order not found"}', "error"),
        ('{"error": null, "items": []}', "ok"),
        ('{"isError": true, "content": []}', "error"),
        ("Error: connection refused", "error"),
        ("Traceback (most recent call last):\n  File ...", "error"),
        ("Errors in shipping are rare.", "ok"),
    ],
)
def test_status_when_not_given_comes_from_the_result(result: str | None, status: str) -> None:
    assert ToolStep(name="t", result=result).status == status
    assert is_error_result(result) is (status == "error")


def test_a_huge_result_is_cut_and_flagged_never_refused() -> None:
    limits = Limits(max_tool_result_chars=100, max_tool_arguments_chars=20)
    big_args = {"query": "x" * 50}
    i = entered(
        event(question="Q?", steps=[{"name": "search_kb", "arguments": big_args, "result": "y" * 10_000}]),
        limits,
    )
    step = i.steps[0]
    assert step.result == "y" * 100 and step.truncated
    assert step.arguments == json.dumps(big_args, separators=(",", ":"))[:20]
    assert i.flags == [
        "tool_result_truncated: steps[0] (search_kb) had 10000 characters (max_tool_result_chars 100)",
        "tool_arguments_truncated: steps[0] (search_kb) had 62 characters (max_tool_arguments_chars 20)",
    ]
    # read again between stages: nothing cut twice, no new flag
    assert decode(i.model_dump_json().encode(), Interaction, limits) == i


def test_ten_thousand_steps_are_capped_and_flagged() -> None:
    many = [calls(*(call(f"c{k}", "lookup", "{}") for k in range(10_000)))]
    many += [tool(f"c{k}", f"r{k}") for k in range(10_000)]
    i = entered(event(messages=[ASK_ORDER, *many]), Limits(max_steps=50))
    assert len(i.steps) == 50 and i.steps[0].call_id == "c9950" and i.steps[-1].result == "r9999"
    assert i.flags == ["steps_dropped: the 9950 earliest of 10000 steps (max_steps 50)"]
    # bad arguments on every step: the flags are capped too
    bad = [{"name": "lookup", "arguments": "not json"}] * 10_000
    i = entered(event(question="Q?", steps=bad), Limits(max_steps=10_000))
    assert len(i.steps) == 10_000 and len(i.flags) == 50 and i.flags[-1] == "more_flags: 9951 more not kept"


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([ASK_ORDER, {"role": "user", "content": "x", "tool_calls": [call("c", "f", "{}")]}],
         "messages.1: only an assistant turn calls tools (this turn's role is user)"),
        ([ASK_ORDER, {"role": "assistant", "content": "x", "tool_call_id": "c"}],
         "messages.1: tool_call_id belongs to a tool turn"),
        ([ASK_ORDER, {"role": "function", "content": "x"}],
         "messages.1: a function turn needs the function's name"),
        ([ASK_ORDER, calls({"id": "c", "type": "function", "function": {"arguments": "{}"}})],
         "messages.1.tool_calls.0.function.name: Field required"),
        ([ASK_ORDER, calls({"id": "c", "type": "retrieval", "function": {"name": "f"}})],
         "messages.1.tool_calls.0.type: Input should be 'function'"),
        ([ASK_ORDER, {"role": "assistant", "parts": [{"type": "tool_call", "id": "k"}]}],
         "messages.1.parts: part 0: a tool_call part needs a name"),
        ([ASK_ORDER, {"role": "tool", "tool_call_id": 7, "content": "x"}],
         "messages.1.tool_call_id: Input should be a valid string"),
        ([ASK_ORDER, {"role": "assistant", "content": "x", "parts": []}],
         "messages.1: give content or parts, not both"),
    ],
)  # fmt: skip
def test_invalid_shapes_are_one_dead_letter_naming_the_field(messages: list[Any], expected: str) -> None:
    with pytest.raises(InvalidMessage) as err:
        entered(event(messages=messages))
    assert expected in str(err.value)
    assert err.value.interaction_id == "t-1"


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([{"call_id": "c"}], "steps.0.name: Field required"),
        ([{"name": ""}], "steps.0.name: String should have at least 1 character"),
        ([{"name": "f", "status": "failed"}], "steps.0.status: Input should be 'ok', 'error' or 'no_result'"),
        ([{"name": "f", "duration_ms": -1}], "steps.0.duration_ms: Input should be greater than or equal"),
        ([{"name": "f", "colour": "red"}], "steps.0.colour: Extra inputs are not permitted"),
        ("search_kb", "steps: Input should be a valid list"),
    ],
)  # fmt: skip
def test_invalid_steps_are_one_dead_letter_naming_the_field(steps: Any, expected: str) -> None:
    with pytest.raises(InvalidMessage) as err:
        entered(event(question="Refunds?", steps=steps))
    assert expected in str(err.value)


def test_non_utf8_and_odd_text_in_a_tool_result_are_kept_as_text() -> None:
    raw = json.dumps(event(question="Q?", steps=[{"name": "f", "result": "caf\udce9"}])).encode()
    with pytest.raises(InvalidMessage):  # a lone surrogate is not UTF-8: refused with the message
        decode(raw.replace(b"\\udce9", b"\xe9"), Interaction, Limits())
    i = entered(event(question="Q?", steps=[{"name": "f", "result": "naïve 😀 \u0000"}]))
    assert i.steps[0].result == "naïve 😀 \u0000"


def deep_arguments(depth: int) -> str:
    return '{"a":' * depth + '"ORD-12345"' + "}" * depth


@pytest.mark.parametrize("where", ["steps", "messages"])
def test_arguments_nested_deeper_than_max_json_depth_are_kept_as_their_json_text_and_flagged(
    where: str,
) -> None:
    """The message passes ``max_json_depth`` (the arguments are one string in it), but parsed they would
    nest 300 levels, which no later stage could write out: they stay text, flagged."""
    text = deep_arguments(300)
    data = event(question="Where is my order?")
    if where == "steps":
        data["steps"] = [{"name": "lookup", "arguments": text, "result": "shipped"}]
    else:
        data["messages"] = [
            ASK_ORDER, calls(call("c1", "lookup", text)), tool("c1", "shipped"),
        ]  # fmt: skip
        del data["question"]
    interaction = entered(data)
    [step] = interaction.steps
    assert step.arguments == text and step.result == "shipped"
    assert [f for f in interaction.flags if f.startswith("tool_arguments")] == [
        "tool_arguments_too_deep: steps[0] (lookup) nested deeper than 64 levels (max_json_depth)"
    ]
    assert not any(f.startswith("arguments_not_json") for f in interaction.flags)
    again = decode(encode(interaction), Interaction, Limits(), between_stages=True)
    assert again == interaction


def test_arguments_given_as_an_object_deeper_than_max_json_depth_are_kept_as_their_json_text() -> None:
    limits = Limits(max_json_depth=3)
    deep = {"a": {"b": {"c": {"d": "ORD-1"}}}}
    shallow = {"a": {"b": {"c": "ORD-2"}}}
    steps = [{"name": "deep", "arguments": deep}, {"name": "shallow", "arguments": shallow}]
    interaction = Interaction.model_validate(
        event(question="Where is my order?", steps=steps), context={"limits": limits}
    )
    assert [s.arguments for s in interaction.steps] == [json.dumps(deep, separators=(",", ":")), shallow]
    assert interaction.flags == [
        "tool_arguments_too_deep: steps[0] (deep) nested deeper than 3 levels (max_json_depth)"
    ]
