"""What every processor shares on the Kafka side: settings, topic names, sending, and the one place an
error becomes a dead letter. The judge and ClickHouse live in ``streams.resources.Resources``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import faust
from pydantic import BaseModel

from schemas.deadletter import DeadLetter
from schemas.errors import InvalidMessage, StageError
from schemas.results import Stage
from schemas.settings import Settings
from streams.codec import dead_letter, encode, fit_letter, original_of
from streams.retry import with_backoff
from streams.telemetry import WorkerMetrics
from streams.topics import TopicNames, topic_names

log = logging.getLogger(__name__)


def stage_of(exc: BaseException, default: Stage) -> Stage:
    """The stage a failure is filed under: "validate" for a message that does not decode, the failing
    stage of a fused evaluation, else the processor's own stage."""
    if isinstance(exc, InvalidMessage):
        return "validate"
    if isinstance(exc, StageError):
        return exc.stage
    return default


@dataclass
class StreamContext:
    settings: Settings
    app: faust.App
    names: TopicNames
    topics: dict[str, Any] = field(default_factory=dict)  # topic name -> faust Topic
    metrics: WorkerMetrics = field(default_factory=WorkerMetrics)

    def topic(self, name: str) -> Any:
        if name not in self.topics:
            self.topics[name] = self.app.topic(
                name,
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
                partitions=self.settings.kafka.partitions,
            )
        return self.topics[name]

    async def send(self, name: str, key: str | None, value: BaseModel) -> None:
        """Send and wait until the broker has it: ``Topic.send`` only buffers and returns the delivery
        future (faust's flush before a commit does not raise for a failed send), so a failed delivery
        raises here and the source event is not acked."""
        delivery = await self.topic(name).send(key=key.encode("utf-8") if key else None, value=encode(value))
        await delivery

    async def send_dead(self, letter: DeadLetter) -> None:
        letter = fit_letter(letter, self.settings.kafka.deadletter_max_bytes)
        log.warning(
            "dead letter: stage=%s id=%s %s: %s",
            letter.stage,
            letter.interaction_id,
            letter.error_type,
            letter.error[:300],
        )
        await self.send(self.names.deadletter, letter.interaction_id, letter)
        self.metrics.dead_letter(letter.stage, letter.error_type)

    def letter_for(
        self, exc: BaseException, default_stage: Stage, raw: bytes | None, source_topic: str, key: str | None
    ) -> DeadLetter:
        """The one way an error on a message becomes a dead letter: its stage (``stage_of``), the
        reason, the original message, its interaction id (the message key, or what the undecodable
        message named) and the original interaction when the message carried one (to replay it onto
        ``interactions``)."""
        interaction_id = key
        if interaction_id is None and isinstance(exc, InvalidMessage):
            interaction_id = exc.interaction_id
        return dead_letter(
            stage=stage_of(exc, default_stage),
            error=exc,
            payload=raw,
            source_topic=source_topic,
            interaction_id=interaction_id,
            original=original_of(raw),
        )

    async def send_dead_or_give_up(self, letter: DeadLetter, where: str, retry_delay_s: float = 1.0) -> None:
        """``send_dead`` retried with backoff, ``kafka.deadletter_attempts`` times in all; then an ERROR log
        naming the message (``where``: topic, partition, offset) and return, so the caller acks it and
        its partition moves on (the same policy as ``streams.runner.run_bounded``)."""
        attempts = self.settings.kafka.deadletter_attempts
        sent = await with_backoff(
            lambda: self.send_dead(letter),
            what=f"dead-lettering {where}",
            attempts=attempts,
            first_delay_s=retry_delay_s,
        )
        if not sent:
            log.error(
                "GIVING UP on %s: its dead letter (stage %s: %s) could not be sent after %d attempts; "
                "acking it so its partition moves on. Re-read it from that offset to recover it.",
                where, letter.stage, letter.error[:300], attempts,
            )  # fmt: skip


def new_context(settings: Settings, app: faust.App) -> StreamContext:
    return StreamContext(settings=settings, app=app, names=topic_names(settings.kafka))
