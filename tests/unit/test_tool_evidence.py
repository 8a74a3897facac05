"""Tool results as evidence: how results become passages, which count (settings), answers with no
evidence at all, ungrounded tool arguments, and the whole pipeline judging an answer against a tool's
result (the lexical judge) down to the stored statement's document."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.evaluator import Evaluator
from pipeline.evidence import evidence, has_factual_statement, is_factual, render, split_result, tool_passages
from pipeline.judges.lexical import LexicalJudge
from pipeline.tool_arguments import checked_values, ungrounded_arguments
from schemas.interaction import Interaction
from schemas.settings import Limits, ToolSettings, settings_from_env
from streams.clickhouse.rows import context_documents, statement_document
from tests.settings_factory import make_settings

KB = [
    {"id": "kb-12", "content": "Refunds are paid within 14 days of the return."},
    {"source": "faq.md", "text": "Returns are free for 30 days."},
]


def interaction(steps: list[dict[str, Any]], **fields: Any) -> Interaction:
    data = {"interaction_id": "t1", "question": "How long do refunds take?", "answer": "x", "steps": steps}
    return Interaction.model_validate({**data, **fields}, context={"limits": Limits()})


# ---- splitting a result ---------------------------------------------------------------------------------
def test_a_json_list_of_documents_gives_one_passage_each_named_by_its_id_or_source() -> None:
    assert split_result(json.dumps(KB), 50) == [
        ("Refunds are paid within 14 days of the return.", "kb-12"),
        ("Returns are free for 30 days.", "faq.md"),
    ]
    wrapped = json.dumps({"results": KB, "total": 2})
    assert split_result(wrapped, 50) == split_result(json.dumps(KB), 50)


@pytest.mark.parametrize("empty", ["[]", '{"results": []}', "{}", "   ", '{"documents": [{"content": " "}]}'])
def test_an_empty_result_gives_no_passage(empty: str) -> None:
    assert split_result(empty, 50) == []


def test_other_json_is_rendered_readably_and_text_is_kept_as_it_is() -> None:
    order = {"order_id": "4471", "status": "shipped", "items": [{"sku": "A1", "qty": 2}], "gift": False}
    [(text, name)] = split_result(json.dumps(order), 50)
    assert name is None
    assert text == "order_id: 4471\nstatus: shipped\nitems:\n  -\n    sku: A1\n    qty: 2\ngift: false"
    assert split_result("Refunds take 14 days.", 50) == [("Refunds take 14 days.", None)]
    assert split_result("[not json", 50) == [("[not json", None)]
    # a list that is not documents is rendered, not split
    assert split_result('[1, "two"]', 50) == [("- 1\n- two", None)]


def test_a_result_nested_deeper_than_python_renders_is_kept_as_text() -> None:
    deep = "[" * 5000 + "]" * 5000
    assert split_result(deep, 50) == [(deep, None)]
    assert render({"a": {}, "b": [None, True]}) == "a: {}\nb:\n  - null\n  - true"


def test_documents_past_the_passage_limit_end_in_one_last_passage() -> None:
    many = [{"id": f"d{i}", "content": f"Fact {i}."} for i in range(5)]
    assert split_result(json.dumps(many), 3) == [
        ("Fact 0.", "d0"),
        ("Fact 1.", "d1"),
        ("Fact 2.\n\nFact 3.\n\nFact 4.", None),
    ]


# ---- which results count ---------------------------------------------------------------------------------
STEPS = [
    {"name": "get_order", "call_id": "c1", "result": "Order 4471 shipped.", "earlier_turn": True},
    {"name": "search_kb", "call_id": "c2", "result": json.dumps(KB)},
    {"name": "send_email", "call_id": "c3", "result": "sent"},
    {"name": "search_kb", "call_id": "c4"},  # no result: nothing to count
]


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ({}, [("get_order", "c1", 0), ("search_kb", "c2", 1), ("search_kb", "c2", 1),
              ("send_email", "c3", 2)]),
        ({"evidence_allow": ["search_kb"]}, [("search_kb", "c2", 1), ("search_kb", "c2", 1)]),
        ({"evidence_deny": ["send_email", "search_kb"]}, [("get_order", "c1", 0)]),
        ({"evidence_earlier_turns": False, "evidence_deny": ["send_email"]},
         [("search_kb", "c2", 1), ("search_kb", "c2", 1)]),
        ({"evidence": False}, []),
    ],
)  # fmt: skip
def test_which_tools_results_count_is_a_setting(tools: dict[str, Any], expected: list[Any]) -> None:
    passages = tool_passages(interaction(STEPS), ToolSettings(**tools))
    assert [(p.tool, p.call_id, p.step) for p in passages] == expected


def test_evidence_is_the_contexts_then_the_tool_passages_named_by_tool() -> None:
    i = interaction(STEPS[:3], contexts=["A retrieved passage."])
    got = evidence(i, ToolSettings())
    assert [(p.text, p.document) for p in got] == [
        ("A retrieved passage.", None),
        ("Order 4471 shipped.", "tool:get_order"),
        ("Refunds are paid within 14 days of the return.", "kb-12"),
        ("Returns are free for 30 days.", "faq.md"),
        ("sent", "tool:send_email"),
    ]


def test_tool_settings_from_the_environment() -> None:
    env = {
        "GROUNDWATCH_TOOLS__EVIDENCE_DENY": '["send_email"]',
        "GROUNDWATCH_TOOLS__EVIDENCE_EARLIER_TURNS": "0",
    }
    tools = settings_from_env(env).tools
    assert tools.evidence_deny == ["send_email"] and tools.evidence_earlier_turns is False


def test_settings_refuse_a_blank_tool_name_and_unknown_keys() -> None:
    with pytest.raises(ValueError, match="a tool name is blank"):
        ToolSettings(evidence_deny=[" "])
    with pytest.raises(ValueError, match="Extra inputs"):
        ToolSettings.model_validate({"evidence_alow": ["x"]})


@pytest.mark.parametrize(
    ("sentence", "factual"),
    [
        ("Refunds take 14 days.", True),
        ("Order 4471", True),
        ("Is there anything else I can help with?", False),
        ("Thank you for contacting Acme support today.", False),
        ("Hello!", False),
        ("England", True),  # a short answer states its claim with the question
        ("...", False),
        ("Happy to help.", False),
        ("We ship worldwide.", True),
    ],
)
def test_what_counts_as_a_factual_statement(sentence: str, factual: bool) -> None:
    assert is_factual(sentence) is factual
    assert has_factual_statement(["Hello!", sentence]) is factual


# ---- ungrounded tool arguments -----------------------------------------------------------------------------
def test_checked_values_are_ids_numbers_and_names_not_free_text() -> None:
    args = {
        "order_id": "A-4471", "qty": 2, "price": 30.0, "express": True, "query": "refund policy for shoes",
        "customer": {"name": "Ada Lovelace", "email": "ada@example.com"}, "tags": ["vip_2"], "note": None,
    }  # fmt: skip
    assert list(checked_values(args)) == [
        ("order_id", "A-4471"),
        ("qty", "2"),
        ("price", "30"),
        ("customer.name", "Ada Lovelace"),
        ("customer.email", "ada@example.com"),
        ("tags[0]", "vip_2"),
    ]


def test_an_argument_found_nowhere_before_the_call_is_ungrounded() -> None:
    steps = [
        {"name": "find_customer", "arguments": {"email": "ada@example.com"},
         "result": '{"customer_id": "C-88"}'},
        {"name": "get_order", "arguments": {"customer_id": "C-88", "order_id": "4,471"}},
        {"name": "refund", "arguments": {"order_id": "9912", "amount": 25}},
    ]  # fmt: skip
    i = interaction(steps, question="My email is ada@example.com and my order is 4471. Refund me 25 euros.")
    # C-88 came from the first tool's result; 4,471 matches 4471; 9912 appears nowhere
    assert ungrounded_arguments(i) == ["refund.order_id=9912"]
    # an earlier turn's call is not checked, but its result counts as seen
    earlier = [
        {"name": "get_order", "arguments": {"order_id": "555"}, "result": "order 555", "earlier_turn": True}
    ]
    assert ungrounded_arguments(interaction(earlier)) is None
    later = [*earlier, {"name": "refund", "arguments": {"order_id": "555"}}]
    assert ungrounded_arguments(interaction(later)) == []
    # arguments that are not a JSON object: nothing to check
    assert ungrounded_arguments(interaction([{"name": "f", "arguments": "order 9999"}])) is None
    # values under the minimum length are not checked
    assert ungrounded_arguments(interaction([{"name": "f", "arguments": {"n": 7}}])) is None


# ---- through the pipeline --------------------------------------------------------------------------------
async def evaluate(i: Interaction, **sections: Any) -> Any:
    evaluator = Evaluator(LexicalJudge(), make_settings(**sections))
    try:
        return await evaluator.evaluate(i)
    finally:
        await evaluator.aclose()


async def test_an_answer_grounded_in_a_tool_result_is_judged_against_it_and_names_it() -> None:
    steps = [
        {
            "name": "search_kb",
            "call_id": "c2",
            "arguments": {"query": "refund time"},
            "result": json.dumps(KB),
        }
    ]
    answer = "Refunds are paid within 14 days of the return."
    ev = await evaluate(interaction(steps, answer=answer))
    assert ev.context_entailment == 1.0 and ev.hallucination is False and ev.outcome == "supported"
    assert ev.no_evidence is False and ev.tool_calls == 1 and ev.tool_error is False
    assert [(p.tool, p.call_id, p.document) for p in ev.evidence] == [
        ("search_kb", "c2", "kb-12"),
        ("search_kb", "c2", "faq.md"),
    ]
    [statement] = ev.pairs[0].hypotheses[0].statements
    assert statement.passage == 0 and statement_document(ev, statement.passage) == "kb-12"
    assert context_documents(ev) == ["kb-12", "faq.md"]
    # the same answer with the tool's results not counted: no evidence at all
    ev = await evaluate(interaction(steps, answer=answer), tools={"evidence_deny": ["search_kb"]})
    assert ev.outcome == "unsupported_no_evidence" and ev.no_evidence is True
    assert ev.context_entailment is None and ev.hallucination is None and ev.evidence == []


async def test_an_empty_tool_result_leaves_a_factual_answer_without_evidence() -> None:
    steps = [{"name": "search_kb", "call_id": "c2", "arguments": {"query": "refund"}, "result": "[]"}]
    ev = await evaluate(interaction(steps, answer="Refunds are paid within 14 days."))
    assert ev.outcome == "unsupported_no_evidence" and ev.no_evidence is True
    # a courtesy without evidence is no unsupported statement; a refusal is a refusal
    ev = await evaluate(interaction(steps, answer="Happy to help."))
    assert ev.no_evidence is None and ev.outcome is None
    ev = await evaluate(interaction(steps, answer="I'm sorry, I don't know how long refunds take."))
    assert ev.answer_refusal is True and ev.outcome == "refusal" and ev.no_evidence is None


async def test_tool_errors_and_ungrounded_arguments_reach_the_evaluation() -> None:
    steps = [
        {"name": "get_order", "call_id": "c1", "arguments": {"order_id": "9912"},
         "result": '{"error": "not found"}'},
        {"name": "get_order", "call_id": "c0", "arguments": {"order_id": "1"}, "result": "ok",
         "earlier_turn": True},
    ]  # fmt: skip
    ev = await evaluate(interaction(steps, answer="Your order could not be found."))
    assert ev.tool_calls == 1 and ev.tool_error is True
    assert ev.ungrounded_arguments is True and ev.ungrounded_argument_values == ["get_order.order_id=9912"]
    # no tools at all: the tool fields say so, the answer is judged as before
    ev = await evaluate(interaction([], contexts=["Refunds take 14 days."], answer="Refunds take 14 days."))
    assert ev.tool_calls == 0 and ev.tool_error is None and ev.ungrounded_arguments is None
    assert ev.outcome == "supported" and ev.evidence == []
