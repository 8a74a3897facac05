"""Each instrumentation of the OpenAI client, in each of its modes, runs a RAG call against the fake
OpenAI server (tests/contract/rag_app.py, a process of its own); what it recorded, encoded by
OpenTelemetry's own encoder as OTLP/JSON, must give `groundwatch otlp` the expected interaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwatch import cli
from pipeline.otlp import NO_CONTENT, NO_CONTENT_IN_RECORDS
from tests.contract import rag_app
from tests.contract.rag_recording import ANSWER, record
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer, Script


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeConfig(script=Script(chat=lambda messages: ANSWER))) as fake:
        yield fake


def groundwatch_otlp(
    capsys: pytest.CaptureFixture[str], *files: Path, code: int = 0
) -> tuple[list[dict], str]:
    """``code``: 2 when the model calls give no interaction."""
    capsys.readouterr()
    assert cli.main(["otlp", *map(str, files)]) == code
    captured = capsys.readouterr()
    return [json.loads(line) for line in captured.out.splitlines()], captured.err


def expect(interaction: dict, *, conversation: str | None, contexts: bool = True) -> None:
    system = rag_app.SYSTEM + "\n\n" + "\n".join(text for _, text in rag_app.PASSAGES)
    assert interaction["question"] == rag_app.QUESTION
    assert [(t["role"], t["content"]) for t in interaction["history"]] == [
        ("system", system),
        *rag_app.HISTORY,
    ]
    assert (interaction["answer"], interaction["app"], interaction["model"]) == (
        ANSWER,
        "support-bot",
        "gpt-4o-mini",
    )
    assert interaction["conversation_id"] == conversation
    passages = [{"document": doc, "text": text} for doc, text in rag_app.PASSAGES] if contexts else []
    assert [{"document": c["document"], "text": c["text"]} for c in interaction["contexts"]] == passages


CASES = [
    # (instrumentation, mode, question as parts, conversation recorded)
    ("openinference", "spans", False, "conv-7"),
    ("openinference", "spans", True, "conv-7"),
    ("openllmetry", "attributes", False, None),
    ("openllmetry", "attributes", True, None),
    ("openllmetry", "events", False, None),
    ("openllmetry", "events", True, None),
    ("openllmetry-0.54", "attributes", False, None),
    ("openllmetry-0.54", "attributes", True, None),
    ("openai-v2", "semconv-1.30", False, None),
    ("openai-v2", "semconv-1.30", True, None),
    ("openai-v2", "span_only", False, None),
    ("openai-v2", "event_only", False, None),
    ("openai-v2", "span_and_event", False, None),
]


@pytest.mark.parametrize(("name", "mode", "parts", "conversation"), CASES)
def test_the_instrumentation_gives_the_expected_interaction(
    server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    name: str, mode: str, parts: bool, conversation: str | None,
) -> None:  # fmt: skip
    out = record(server, tmp_path, name, mode, parts)
    (interaction,), err = groundwatch_otlp(capsys, out / "traces.jsonl", out / "logs.jsonl")
    assert "1 interactions, 0 model calls read as steps, 0 model calls not mapped" in err, err
    expect(interaction, conversation=conversation)


@pytest.mark.parametrize("mode", ["span_only", "event_only", "span_and_event"])
def test_openai_v2_drops_a_question_given_as_parts_and_says_so(
    server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    out = record(server, tmp_path, "openai-v2", mode, parts=True)
    interactions, err = groundwatch_otlp(capsys, out / "traces.jsonl", out / "logs.jsonl", code=2)
    assert interactions == [] and "the model call has no user message" in err, err


def test_openai_v2_by_default_records_no_content_and_the_reason_says_what_to_do(
    server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = record(server, tmp_path, "openai-v2", "no-content")
    interactions, err = groundwatch_otlp(capsys, out / "traces.jsonl", code=2)
    assert interactions == [] and NO_CONTENT in err, err
    interactions, err = groundwatch_otlp(capsys, out / "traces.jsonl", out / "logs.jsonl", code=2)  # events
    assert interactions == [] and NO_CONTENT_IN_RECORDS in err, err


def test_logs_alone_give_the_interaction_without_the_trace(
    server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = record(server, tmp_path, "openai-v2", "event_only")
    (interaction,), _ = groundwatch_otlp(capsys, out / "logs.jsonl")
    expect(interaction, conversation=None, contexts=False)  # the passages were on the (unread) trace
    assert interaction["metadata"]["source"] == "logs"
