"""A multi-turn conversation replayed through the real broker and a worker on chDB: each turn's history
is stored with its evaluation (and counted in columns), the follow-up's "it" is resolved from the earlier
turns by the judge (the fake OpenAI-compatible server over real HTTP, scripted to resolve only from the
turns its prompt carries), a history over the limit loses its oldest turns and is flagged, and invalid
conversations are dead-lettered with their reason; a tool-calling agent's conversation is judged against
its tool's result, and without evidence when the search came back empty."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from schemas.deadletter import DeadLetter
from schemas.interaction import Interaction
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer, Script
from tests.integration.helpers import deployment, jsonl, topic_of

CONTEXT = "The Pro plan costs 30 dollars a month per team. It includes priority support."
ASK = {"role": "user", "content": "What is the Pro plan?"}
REPLY = {"role": "assistant", "content": "The Pro plan is our tier for teams of up to 50 people."}
FOLLOW_UP = {"role": "user", "content": "And how much does it cost?"}
SUPPORT = {"role": "assistant", "content": "It costs 30 dollars a month per team."}
LAST = {"role": "user", "content": "Does it include support?"}


def resolve_from_turns(sentences: list[str], turns: list[tuple[str, str]]) -> list[str]:
    """Stands in for the model: "it" becomes "the Pro plan" only when a turn in the prompt names it."""
    if not any("Pro plan" in text for _, text in turns):
        return sentences
    return [s.replace("It ", "The Pro plan ").replace(" it ", " the Pro plan ") for s in sentences]


KB_RESULT = json.dumps([{"id": "pricing.md", "content": CONTEXT}])

RECORDS: list[dict[str, Any]] = [
    {"interaction_id": "conv-1", "conversation_id": "c", "messages": [ASK], "contexts": [CONTEXT],
     "answer": REPLY["content"]},
    {"interaction_id": "conv-2", "conversation_id": "c", "messages": [ASK, REPLY, FOLLOW_UP],
     "contexts": [CONTEXT], "answer": "It costs 30 dollars a month per team."},
    # five earlier turns, the limit is three: the two oldest go, and the interaction is flagged
    {"interaction_id": "conv-3", "conversation_id": "c", "messages": [ASK, REPLY, FOLLOW_UP, SUPPORT,
     {"role": "user", "content": "Is it for teams?"}, LAST], "contexts": [CONTEXT],
     "answer": "Yes, it includes priority support."},
    # a tool-calling agent: its search's result is the evidence; then the same search coming back empty
    {"interaction_id": "tool-1", "conversation_id": "t", "messages": [
        {"role": "user", "content": "How much is the Pro plan?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "search_kb", "arguments": '{"query": "Pro plan price"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": KB_RESULT},
     ], "answer": "The Pro plan costs 30 dollars a month per team."},
    {"interaction_id": "tool-2", "conversation_id": "t", "messages": [
        {"role": "user", "content": "How much is the Pro plan?"},
        {"role": "assistant", "tool_calls": [{"id": "call_2", "type": "function",
         "function": {"name": "search_kb", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "[]"},
     ], "answer": "The Pro plan costs 30 dollars a month per team."},
    {"interaction_id": "bad-role", "messages": [ASK, {"role": "robot", "content": "{}"}, FOLLOW_UP],
     "answer": "x"},
    {"interaction_id": "bad-no-user", "messages": [REPLY], "answer": "x"},
]  # fmt: skip

QUERY = """
import json
from schemas.settings import Settings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(Settings().clickhouse, migrate=False)
rows = store.query_sync(
    "SELECT interaction_id, conversation_id, history_turns, history_truncated, tool_calls, no_evidence, "
    "context_documents, payload "
    f"FROM {store.db}.evaluations FINAL ORDER BY interaction_id"
)
print(json.dumps(rows, default=str))
"""


@pytest.fixture()
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeConfig(script=Script(pronouns_in_conversation=resolve_from_turns))) as server:
        yield server


def stored_rows(dep: LocalStack) -> list[dict[str, Any]]:
    """The evaluations table read by a child process (chDB: one process per path; the worker stopped)."""
    out = subprocess.run(
        [sys.executable, "-c", QUERY],
        env=dep.env(),
        cwd=dep.workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def test_a_conversation_is_evaluated_turn_by_turn_with_its_history(
    broker: TansuBroker, fake: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {
        "GROUNDWATCH_JUDGE__KIND": "openai",
        "GROUNDWATCH_JUDGE__BASE_URL": fake.base_url,
        "GROUNDWATCH_JUDGE__API_KEY": "test-key",
        "GROUNDWATCH_JUDGE__MODEL": "fake-model",
        "GROUNDWATCH_JUDGE__CACHE_ENABLED": "false",
        "GROUNDWATCH_LIMITS__MAX_HISTORY_TURNS": "3",
    }
    dep = deployment(broker.url, tmp_path_factory.mktemp("conversation"), extra_env=env)
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), jsonl(RECORDS)))
        wait_for(lambda: dep.evaluations() >= 5, 180, "the five interactions in ClickHouse")
        letters = [DeadLetter.model_validate(d) for d in topic_of(dep, "deadletter", expect=2)]
    finally:
        assert worker.stop() == 0, worker.tail()

    rows = {r["interaction_id"]: r for r in stored_rows(dep)}
    assert sorted(rows) == ["conv-1", "conv-2", "conv-3", "tool-1", "tool-2"]
    tools = {i: rows.pop(i) for i in ("tool-1", "tool-2")}
    assert [(r["tool_calls"], r["no_evidence"]) for r in tools.values()] == [(1, 0), (1, 1)]
    assert tools["tool-1"]["context_documents"] == ["pricing.md"]
    first_tool, second_tool = (json.loads(r["payload"]) for r in tools.values())
    assert [(p["tool"], p["call_id"], p["document"]) for p in first_tool["evidence"]] == [
        ("search_kb", "call_1", "pricing.md")
    ]
    assert first_tool["interaction"]["steps"][0]["arguments"] == {"query": "Pro plan price"}
    assert second_tool["outcome"] == "unsupported_no_evidence" and second_tool["evidence"] == []
    assert [(s["call_id"], s["result"]) for s in second_tool["interaction"]["steps"]] == [("call_2", "[]")]
    assert [(rows[i]["history_turns"], rows[i]["history_truncated"]) for i in sorted(rows)] == [
        (0, 0),
        (2, 0),
        (3, 1),
    ]
    payloads = {i: json.loads(r["payload"]) for i, r in rows.items()}
    second = Interaction.model_validate(payloads["conv-2"]["interaction"])
    assert second.question == FOLLOW_UP["content"] and second.conversation_id == "c"
    assert [(t.role, t.content) for t in second.history] == [
        ("user", ASK["content"]),
        ("assistant", REPLY["content"]),
    ]
    third = Interaction.model_validate(payloads["conv-3"]["interaction"])
    assert third.question == LAST["content"] and third.history_truncated
    assert [t.content for t in third.history] == [
        FOLLOW_UP["content"],
        SUPPORT["content"],
        "Is it for teams?",
    ]

    # the follow-up's answer was judged with "it" resolved from the earlier turns its prompt carried
    hypotheses = {
        i: [h["hypothesis"] for p in payload["pairs"] for h in p["hypotheses"]]
        for i, payload in payloads.items()
    }
    assert hypotheses["conv-2"] == ["The Pro plan costs 30 dollars a month per team."]
    # the turns naming the plan were dropped (limit 3): the prompt had nothing to resolve "it" from; the
    # answer is short (5 words), so it is judged framed by the question it answers
    assert hypotheses["conv-3"] == [f"{LAST['content']} Yes, it includes priority support."]
    pronoun_prompts = [
        b["messages"][1]["content"] for b in fake.stats.bodies if "<sentences>" in b["messages"][1]["content"]
    ]
    assert any(f'<turn role="assistant">{REPLY["content"]}</turn>' in p for p in pronoun_prompts)

    by_id = {d.interaction_id: d for d in letters}
    assert sorted(by_id) == ["bad-no-user", "bad-role"]
    assert all(d.stage == "validate" for d in letters)
    assert "messages.1.role: Input should be 'system', 'user', 'assistant', 'tool' or 'function'" in (
        by_id["bad-role"].error
    )
    assert "messages has no user turn and there is no question" in by_id["bad-no-user"].error
    assert by_id["bad-role"].original is not None  # the event itself, to fix and replay
