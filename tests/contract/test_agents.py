"""Agent frameworks and their instrumentations: a two-turn tool-calling support bot
(tests/contract/agent_app.py, a process of its own in the environment its framework needs) against the
fake OpenAI server, which calls the knowledge-base tool once a turn and then answers from its result.
Through `groundwatch otlp`, each framework must give exactly one interaction per final answer (two),
with the tool's result as a step, the question and history of the turn, and no model call left over;
judged, each answer is supported by its turn's tool result (the evidence names the tool and call)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundwatch import cli
from groundwatch.local.stack import LocalStack
from tests.contract import agent_app
from tests.contract.conftest import agents_python, need
from tests.contract.otlp_topics import produce
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer, Script

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = {question: answer for question, answer, _ in agent_app.TURNS}


def question_of(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return str(users[-1]["content"]) if users else ""


def tool_call(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """Call the tool until its result follows the question, then answer."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if any(m.get("role") == "tool" for m in messages[last_user + 1 :]):
        return None
    return agent_app.TOOL, {"query": question_of(messages)}


def answer(messages: list[dict[str, Any]]) -> str:
    return ANSWERS.get(question_of(messages), "I do not know.")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeConfig(script=Script(chat=answer, tool_call=tool_call))) as fake:
        yield fake


#: framework -> the environment it runs in (``make dev``: openai 2.x, or the openai 3.x one)
ENVIRONMENTS = {
    "openai-v2": "openai2",
    "openai-v2-events": "openai2",
    "openinference-openai": "openai2",
    "openllmetry-openai": "openai2",
    "openinference-langgraph": "openai2",
    "openllmetry-langgraph": "openai2",
    "openinference-agents": "openai3",
    "openllmetry-agents": "openai3",
    "pydantic-ai": "openai3",
    "pydantic-ai-v6": "openai3",
}


def record(server: FakeOpenAIServer, out: Path, framework: str) -> Path:
    python = agents_python(ENVIRONMENTS[framework])
    need(f"the {ENVIRONMENTS[framework]} agent environment", python.is_file())
    argv = [str(python), "-m", "tests.contract.agent_app", "--framework", framework,
            "--base-url", server.base_url, "--out", str(out)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def groundwatch_otlp(capsys: pytest.CaptureFixture[str], *files: Path) -> tuple[int, list[dict], str]:
    capsys.readouterr()
    code = cli.main(["otlp", *map(str, files)])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


#: frameworks whose traces carry no conversation id (their instrumentors export none); Pydantic AI
#: records one of its own (``gen_ai.conversation.id``); the others carry the app's (the app's root span,
#: or OpenInference's ``using_session``)
NO_CONVERSATION = {"openllmetry-langgraph", "openllmetry-agents"}


def expect_turns(interactions: list[dict], framework: str) -> None:
    assert [i["question"] for i in interactions] == [q for q, _, _ in agent_app.TURNS]
    history: list[tuple[str, str]] = []
    for interaction, (question, reply, doc) in zip(interactions, agent_app.TURNS, strict=True):
        assert interaction["answer"] == reply and interaction["app"] == agent_app.APP
        assert [(t["role"], t["content"]) for t in interaction["history"] if t["role"] != "system"] == history
        now = [s for s in interaction["steps"] if not s["earlier_turn"]]
        assert [(s["name"], s["status"]) for s in now] == [(agent_app.TOOL, "ok")], interaction["steps"]
        assert json.loads(now[0]["result"]) == [{"id": doc, "content": agent_app.DOCUMENTS[doc]}]
        assert now[0]["arguments"] == {"query": question}
        history += [("user", question), ("assistant", reply)]
    first, second = (i["conversation_id"] for i in interactions)
    assert first == second
    if framework in NO_CONVERSATION:
        assert first is None
    elif not framework.startswith("pydantic-ai"):
        assert first == agent_app.SESSION


@pytest.mark.parametrize("framework", list(ENVIRONMENTS))
def test_one_interaction_per_final_answer_with_the_tool_result_as_a_step(
    server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], framework: str
) -> None:
    out = record(server, tmp_path, framework)
    code, interactions, err = groundwatch_otlp(capsys, out / "traces.jsonl", out / "logs.jsonl")
    assert code == 0 and err.strip().splitlines()[-1].endswith(", 0 model calls not mapped"), err
    expect_turns(interactions, framework)
    # judged (lexical), each answer is supported by its turn's tool result, named by tool and call id
    path = tmp_path / "interactions.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in interactions))
    assert cli.main(["eval", str(path), "--judge", "lexical", "--out", str(tmp_path / "report.json")]) == 0
    rows = (tmp_path / "report.evaluations.jsonl").read_text().splitlines()
    evaluations = {e["interaction_id"]: e for e in map(json.loads, rows)}
    for interaction, (_, _, doc) in zip(interactions, agent_app.TURNS, strict=True):
        judged = evaluations[interaction["interaction_id"]]
        assert judged["outcome"] == "supported" and not judged["hallucination"], judged
        [call] = [s["call_id"] for s in interaction["steps"] if not s["earlier_turn"]]
        assert {(e["tool"], e["call_id"], e["document"]) for e in judged["evidence"]} >= {
            (agent_app.TOOL, call, doc)
        }


def test_an_agent_trace_sent_span_by_span_through_a_worker_gives_one_evaluation_per_answer(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """LangGraph under OpenInference (chain and agent spans that carry messages; model calls that only
    ask for the tool), each span in an export request of its own on a real Tansu broker: the worker
    holds each trace until its root span and evaluates the two answers, with no dead letter."""
    out = record(server, tmp_path / "app", "openinference-langgraph")
    lines = []
    for line in (out / "traces.jsonl").read_text().splitlines():
        request = json.loads(line)
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    one = {**resource, "scopeSpans": [{**scope, "spans": [span]}]}
                    lines.append(json.dumps({"resourceSpans": [one]}))
    env = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_KAFKA__OTLP_INPUT": "true",
           "GROUNDWATCH_KAFKA__OTLP_HOLD_S": "60"}  # fmt: skip
    with LocalStack(tmp_path / "stack", env, partitions=1, window_seconds=2) as stack:
        asyncio.run(produce(stack, [("traces", line) for line in lines]))
        stack.wait_for_evaluations(2, timeout_s=120)
        report = stack.finish()
    assert report.counts["evaluations"] == 2  # not one a model call: one a final answer
    assert report.counts.get("dead_letters", 0) == 0, stack.worker_log.read_text()[-3000:]
