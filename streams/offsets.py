"""Where a new consumer group starts reading its input topics (``kafka.start_offset``).

faust reads every topic of a group without committed offsets from its start (``earliest``): the topics
between the stages must be, or a rebalance before the first commit would skip what a stage already sent
on. For the input topics (interactions; otlp and otlp_logs when they are read) ``start_offset``
decides: with ``latest``, each of their partitions the group has no committed offset for gets one at
the partition's current end, before the worker joins the group, so a new deployment judges what is
produced from then on instead of everything the topic retains. A group with committed offsets resumes
from them either way.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import CommitFailedError

from schemas.settings import KafkaSettings
from streams.kafka_auth import aiokafka_auth
from streams.topics import bootstrap_servers, topic_names

log = logging.getLogger(__name__)


def input_topics(kafka: KafkaSettings) -> list[str]:
    names = topic_names(kafka)
    traces = [names.otlp] if kafka.otlp_input else []
    logs = [names.otlp_logs] if kafka.otlp_logs_input else []
    return [names.interactions, *traces, *logs]


async def apply_start_offset(kafka: KafkaSettings) -> dict[TopicPartition, int]:
    """With ``start_offset`` ``latest``: commit the end offset of every input-topic partition the consumer
    group has no committed offset for; return what was committed (nothing with ``earliest``). Run before
    the worker joins the group (the topics exist by then)."""
    if kafka.start_offset == "earliest":
        return {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers(kafka.broker),
        group_id=kafka.consumer_group,
        enable_auto_commit=False,
        **aiokafka_auth(kafka),
    )
    await consumer.start()
    try:
        await consumer.topics()  # metadata of every topic, for partitions_for_topic
        partitions = [
            TopicPartition(topic, p)
            for topic in input_topics(kafka)
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        fresh = [tp for tp in partitions if await consumer.committed(tp) is None]
        if not fresh:
            return {}
        ends = await consumer.end_offsets(fresh)
        consumer.assign(fresh)
        try:
            await consumer.commit({tp: ends[tp] for tp in fresh})
        except CommitFailedError:  # the group is already running: its members committed at their start
            log.info("consumer group %s is active: its committed offsets stand", kafka.consumer_group)
            return {}
        log.info(
            "new consumer group %s starts %s at their end (kafka.start_offset latest)",
            kafka.consumer_group,
            ", ".join(input_topics(kafka)),
        )
        return {tp: ends[tp] for tp in fresh}
    finally:
        await consumer.stop()
