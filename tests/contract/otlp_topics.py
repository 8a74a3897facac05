"""``produce``: OTLP/JSON lines, each of kind ``traces`` or ``logs``, sent onto the otlp and otlp_logs
topics of a stack's broker (the topics made first)."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from groundwatch.local.stack import LocalStack
from streams.topics import bootstrap_servers, ensure_topics, topic_names


async def produce(stack: LocalStack, messages: list[tuple[str, str]]) -> None:
    settings = stack.settings()
    await ensure_topics(settings.kafka)
    names = topic_names(settings.kafka)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(settings.kafka.broker), acks="all")
    await producer.start()
    try:
        for kind, line in messages:
            await producer.send_and_wait(names.otlp if kind == "traces" else names.otlp_logs, line.encode())
    finally:
        await producer.stop()
