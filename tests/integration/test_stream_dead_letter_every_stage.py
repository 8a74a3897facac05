"""A bad message on the input topic of every processor ends in the dead-letter topic, each with the topic
it came from, its reason and the original bytes; none is dropped and good traffic still gets through
(real Tansu broker, worker subprocess on the staged topology, which reads every internal topic, chDB)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiokafka import AIOKafkaProducer

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from schemas.deadletter import DeadLetter
from streams.topics import bootstrap_servers, ensure_topics, topic_names
from tests.integration.helpers import deployment, topic_of

#: per input topic (by its TopicNames field), a message its processor cannot take
BAD: dict[str, bytes] = {
    "interactions": b'{"interaction_id": "bad-interaction", "question": "Where?"}',  # no answer
    "converted": b'{"interaction": "not an interaction"}',
    "judged": b"[1, 2, 3]",
    "evaluations": b'{"interaction_id": "bad-evaluation", "timestamp": "yesterday"}',
    "otlp": b'{"resourceSpans": "not a list"}',
}
GOOD = {"interaction_id": "good-1", "question": "Where is Paris?", "answer": "Paris is in France.",
        "contexts": ["Paris is the capital of France."]}  # fmt: skip


async def produce(dep: LocalStack) -> None:
    settings = dep.settings()
    await ensure_topics(settings.kafka)
    names = topic_names(settings.kafka)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(settings.kafka.broker), acks="all")
    await producer.start()
    try:
        for field, payload in BAD.items():
            await producer.send_and_wait(getattr(names, field), payload)
        await producer.send_and_wait(names.interactions, json.dumps(GOOD).encode())
    finally:
        await producer.stop()


def test_a_bad_message_on_every_input_topic_is_dead_lettered(broker: TansuBroker, tmp_path: Path) -> None:
    dep = deployment(
        broker.url,
        tmp_path,
        extra_env={"GROUNDWATCH_KAFKA__OTLP_INPUT": "true", "GROUNDWATCH_KAFKA__TOPOLOGY": "staged"},
    )
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(produce(dep))
        wait_for(lambda: dep.evaluations() >= 1, 120, "the good interaction in ClickHouse")
        letters = [DeadLetter.model_validate(d) for d in topic_of(dep, "deadletter", expect=len(BAD))]
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
    by_topic = {str(d.source_topic).removeprefix(dep.prefix): d for d in letters}
    assert sorted(by_topic) == sorted(BAD), letters
    for field, letter in by_topic.items():
        assert letter.error, field
        assert letter.stage in ("validate", "otlp"), (field, letter.stage)
    assert by_topic["interactions"].interaction_id == "bad-interaction"
    assert "answer" in by_topic["interactions"].error
    for field in ("interactions", "converted", "judged", "evaluations", "otlp"):  # the original travels along
        assert by_topic[field].payload == BAD[field].decode(), field
    assert dep.report().counts["evaluations"] == 1  # the good one, once
