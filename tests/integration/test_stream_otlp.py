"""OpenTelemetry traces on the otlp topic become evaluated interactions; an unmappable span is a dead
letter with the reason (real Tansu broker, real worker, chDB)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiokafka import AIOKafkaProducer

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from streams.topics import bootstrap_servers, ensure_topics, topic_names

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "otlp_traces.jsonl"


async def produce(stack: LocalStack, lines: list[str]) -> None:
    settings = stack.settings()
    await ensure_topics(settings.kafka)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(settings.kafka.broker), acks="all")
    await producer.start()
    try:
        for line in lines:
            await producer.send_and_wait(topic_names(settings.kafka).otlp, line.encode())
    finally:
        await producer.stop()


def test_otlp_spans_are_evaluated_and_unmappable_ones_dead_lettered(tmp_path: Path) -> None:
    env = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_KAFKA__OTLP_INPUT": "true"}
    lines = [line for line in FIXTURE.read_text().splitlines() if line.strip()]
    with LocalStack(tmp_path, env, partitions=2, window_seconds=2) as stack:
        asyncio.run(produce(stack, [*lines, '{"resourceSpans": []}']))
        stack.wait_for_evaluations(2, timeout_s=120)

        def dead_letters_stored() -> bool:
            status = stack.worker.status() if stack.worker else None
            return bool(status and status.counts.get("dead_letters", 0) >= 2)

        wait_for(dead_letters_stored, 60, "the dead letters in ClickHouse")
        report = stack.finish()
    assert report.counts["evaluations"] == 2
    assert {(w.app, w.model) for w in report.windows} == {
        ("support-bot", "gpt-4o-mini-2024-07-18"),
        ("wiki-bot", "gpt-4o"),
    }
    log = stack.worker_log.read_text()
    assert "dead letter: stage=otlp" in log and "no output message" in log
    assert "dead letter: stage=validate" in log  # the export without spans
