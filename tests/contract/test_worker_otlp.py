"""End to end through a worker: what real instrumentations recorded goes onto the otlp (traces) and
otlp_logs topics of a real Tansu broker, and the worker evaluates each model call once, its span and its
log records joined; a call recorded without content (the default of opentelemetry-instrumentation-openai-v2)
is dead-lettered with the reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from pipeline.otlp import NO_CONTENT_IN_RECORDS
from tests.contract.otlp_topics import produce
from tests.contract.rag_recording import ANSWER, record
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer, Script


def test_traces_and_logs_of_real_instrumentations_through_a_worker(tmp_path: Path) -> None:
    with FakeOpenAIServer(FakeConfig(script=Script(chat=lambda messages: ANSWER))) as server:
        runs = {
            "events": record(server, tmp_path / "events", "openai-v2", "event_only"),
            "spans": record(server, tmp_path / "spans", "openinference", "spans"),
            "none": record(server, tmp_path / "none", "openai-v2", "no-content"),
        }
    messages = []
    for run in runs.values():  # the logs first: a record waits for its span
        for kind in ("logs", "traces"):
            messages += [(kind, line) for line in (run / f"{kind}.jsonl").read_text().splitlines() if line]
    env = {
        "GROUNDWATCH_JUDGE__KIND": "lexical",
        "GROUNDWATCH_KAFKA__OTLP_INPUT": "true",
        "GROUNDWATCH_KAFKA__OTLP_LOGS_INPUT": "true",
        "GROUNDWATCH_KAFKA__OTLP_HOLD_S": "3",
    }
    with LocalStack(tmp_path / "stack", env, partitions=2, window_seconds=2) as stack:
        asyncio.run(produce(stack, messages))
        stack.wait_for_evaluations(2, timeout_s=120)

        def dead_letter_stored() -> bool:
            status = stack.worker.status() if stack.worker else None
            return bool(status and status.counts.get("dead_letters", 0) >= 1)

        wait_for(dead_letter_stored, 60, "the dead letter in ClickHouse")
        report = stack.finish()
    assert report.counts["evaluations"] == 2  # one each: the span and the records of a call joined
    assert {(w.app, w.model) for w in report.windows} == {("support-bot", "gpt-4o-mini")}
    log = stack.worker_log.read_text()
    assert "dead letter: stage=otlp" in log and NO_CONTENT_IN_RECORDS in log
