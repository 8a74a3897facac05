"""kafka.start_offset on the real (Tansu) broker: a new group with ``latest`` starts its input topics at
their end, the topics between stages and a group that has committed are left alone."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from groundwatch.local.tansu import TansuBroker
from schemas.settings import KafkaSettings
from streams.offsets import apply_start_offset
from streams.topics import bootstrap_servers, ensure_topics, topic_names


async def committed(kafka: KafkaSettings, topic: str) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers(kafka.broker), group_id=kafka.consumer_group
    )
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(kafka.partitions)}
    finally:
        await consumer.stop()


async def scenario(broker_url: str) -> None:
    prefix = f"so{uuid.uuid4().hex[:6]}."
    kafka = KafkaSettings(broker=broker_url, topic_prefix=prefix, partitions=2, consumer_group=f"{prefix}g")
    await ensure_topics(kafka)
    names = topic_names(kafka)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(broker_url))
    await producer.start()
    try:
        for i in range(6):  # retained before the group's first start: never judged with ``latest``
            await producer.send_and_wait(names.interactions, b"{}", key=f"k{i}".encode(), partition=i % 2)
            await producer.send_and_wait(names.converted, b"{}", key=f"k{i}".encode(), partition=i % 2)
    finally:
        await producer.stop()
    assert await apply_start_offset(kafka.model_copy(update={"start_offset": "earliest"})) == {}
    assert await committed(kafka, names.interactions) == {0: None, 1: None}

    started = await apply_start_offset(kafka)
    at = await committed(kafka, names.interactions)
    assert {tp.partition: offset for tp, offset in started.items()} == at
    assert all(offset is not None and offset > 0 for offset in at.values())
    assert {tp.topic for tp in started} == {names.interactions}  # otlp is not read: left alone
    assert await committed(kafka, names.converted) == {0: None, 1: None}  # read from its start

    assert await apply_start_offset(kafka) == {}  # committed: the group resumes where it was
    assert await committed(kafka, names.interactions) == at


def test_a_new_group_starts_its_input_at_the_end(broker: TansuBroker) -> None:
    asyncio.run(scenario(broker.url))
