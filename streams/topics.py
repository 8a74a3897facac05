"""Topic names under the configured prefix and their creation (co-partitioned: the same partition count;
keyed by interaction_id, but for ``touches``, keyed by the work it hands over)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from schemas.errors import BrokerUnavailable, ConfigError
from schemas.settings import KafkaSettings
from schemas.topics import TOPIC_MESSAGES
from streams.kafka_auth import aiokafka_auth

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicNames:
    interactions: str
    converted: str
    judged: str  # the judge processor's NLI and refusal results (schemas.results.JudgeResult)
    evaluations: str
    alerts: str
    deadletter: str
    otlp: str  # OpenTelemetry traces (OTLP/JSON), read when kafka.otlp_input is on
    otlp_logs: str  # OpenTelemetry logs (OTLP/JSON), read when kafka.otlp_logs_input is on
    labels: str  # people's labels (schemas.label.Label), stored in ClickHouse labels
    # internal: windows keyed by (app, model), conversations by (app, model, conversation_id), so one
    # partition's owner closes each (schemas.touch.Touch, streams.ownership)
    touches: str
    # internal: the topic models of the worker's refits, read from the start by every process
    # (streams.topic_models)
    topic_models: str

    def all(self) -> list[str]:
        return [
            self.interactions,
            self.converted,
            self.judged,
            self.evaluations,
            self.alerts,
            self.deadletter,
            self.otlp,
            self.otlp_logs,
            self.labels,
            self.touches,
            self.topic_models,
        ]


def topic_names(kafka: KafkaSettings) -> TopicNames:
    """Every topic of the registry (``schemas.topics``) under ``kafka.topic_prefix``."""
    return TopicNames(**{topic: f"{kafka.topic_prefix}{topic}" for topic in TOPIC_MESSAGES.by_topic()})


def bootstrap_servers(broker: str) -> str:
    """``kafka://h1:9092;kafka://h2:9092`` (faust style) -> ``h1:9092,h2:9092`` (aiokafka style)."""
    hosts = []
    for part in broker.replace(";", ",").split(","):
        part = part.strip()
        if "://" in part:
            part = part.split("://", 1)[1]
        if part:
            hosts.append(part.rstrip("/"))
    if not hosts:
        raise ValueError(f"no broker address in {broker!r}")
    return ",".join(hosts)


def check_copartitioned(partitions: dict[str, int]) -> None:
    """The join needs its inputs (and the stages feeding them) on the same number of partitions."""
    counts = {name: n for name, n in partitions.items() if n > 0}
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{name}={n}" for name, n in sorted(counts.items()))
        raise ConfigError(
            "groundwatch topics must all have the same partition count (they are joined by "
            f"interaction_id): {listing}. Recreate them or use a new topic prefix."
        )


async def ensure_topics(kafka: KafkaSettings) -> list[str]:
    """Create the missing topics with the configured partitions; return the names created.

    Every topic gets the same partition count, so a key (interaction_id) lands on the same partition
    number everywhere and the join's inputs are co-partitioned.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers(kafka.broker), **aiokafka_auth(kafka))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [n for n in topic_names(kafka).all() if n not in existing]
        if missing:
            try:
                await admin.create_topics(
                    [
                        NewTopic(name=n, num_partitions=kafka.partitions, replication_factor=kafka.replicas)
                        for n in missing
                    ]
                )
            except TopicAlreadyExistsError:  # another worker won the race
                pass
            log.info("created topics %s", missing)
        described = await admin.describe_topics(topic_names(kafka).all())
        counts = {t["topic"]: len(t.get("partitions") or []) for t in described}
        check_copartitioned(counts)
        if any(n and n != kafka.partitions for n in counts.values()):
            log.warning(
                "topics have %s partitions, not the configured %d", set(counts.values()), kafka.partitions
            )
        return missing
    finally:
        await admin.close()


@contextmanager
def broker_errors(kafka: KafkaSettings, doing: str) -> Iterator[None]:
    """A Kafka client error inside becomes one BrokerUnavailable, "cannot <doing> the broker at <broker>:
    <why>"; aiokafka's own log lines about the failed connection are held back meanwhile (the one line
    says it)."""
    aiokafka_log = logging.getLogger("aiokafka")
    level = aiokafka_log.level
    aiokafka_log.setLevel(logging.CRITICAL)
    try:
        yield
    except KafkaError as exc:
        raise BrokerUnavailable(f"cannot {doing} the broker at {kafka.broker}: {exc}") from exc
    finally:
        aiokafka_log.setLevel(level)
