"""What every processor shares on the Kafka side: settings, topic names, sending, and the one place a
failure becomes a dead letter and the one give-up policy when that cannot be sent. The judge and
ClickHouse live in ``streams.resources.Resources``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import faust
from aiokafka.errors import MessageSizeTooLargeError
from pydantic import BaseModel

from pipeline.clock import Clock, SystemClock
from pipeline.retry import Backoff, retry
from schemas.deadletter import DeadLetter
from schemas.errors import MessageTooLarge
from schemas.results import Stage
from schemas.settings import Settings
from schemas.settings.common import variable_name
from streams.codec import Origin, dead_letter, encode, fit_letter
from streams.handoff import Place
from streams.telemetry import WorkerMetrics
from streams.topics import TopicNames, topic_names

log = logging.getLogger(__name__)


@dataclass
class StreamContext:
    settings: Settings
    app: faust.App
    names: TopicNames
    topics: dict[str, Any] = field(default_factory=dict)  # topic name -> faust Topic
    metrics: WorkerMetrics = field(default_factory=WorkerMetrics)
    #: the worker's one clock (``Resources`` shares it): what retries wait on; tests pass a ManualClock
    clock: Clock = field(default_factory=SystemClock)
    #: the first wait before a dead letter is sent again (doubling from there)
    retry_delay_s: float = 1.0

    @property
    def reasons_show_values(self) -> bool:
        """Whether a reason built from bad input may quote its values: not in ``privacy.mode`` all,
        where no reason, log line or row carries a value the masking did not see."""
        return self.settings.privacy.mode != "all"

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

    async def send(self, name: str, key: str | None, value: BaseModel) -> Place:
        """Send and wait until the broker has it: ``Topic.send`` only buffers and returns the delivery
        future (faust's flush before a commit does not raise for a failed send), so a failed delivery
        raises here and the source event is not acked. Returns where the message was written."""
        encoded = encode(value)
        try:
            delivery = await self.topic(name).send(key=key.encode("utf-8") if key else None, value=encoded)
            written = await delivery
            return (str(written.topic), int(written.partition), int(written.offset))
        except MessageSizeTooLargeError:
            limit = self.settings.kafka.max_message_bytes
            raise MessageTooLarge(
                f"the {name} message is {len(encoded):,} bytes, over the producer's {limit:,} "
                f"({variable_name('kafka', 'max_message_bytes')}) or the broker's message.max.bytes"
            ) from None

    async def send_dead(self, letter: DeadLetter) -> None:
        """Send one dead letter (fitted to ``kafka.deadletter_max_bytes``) and count it; raises when the
        broker does not take it."""
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

    async def dead_letter(
        self,
        error: BaseException,
        stage: Stage,
        payload: bytes | str | None,
        *,
        origin: Origin | None = None,
        source_topic: str | None = None,
        interaction_id: str | None = None,
        original: str | None = None,
    ) -> bool:
        """The one way a failure on a message ends: its dead letter (``streams.codec.dead_letter``) is
        sent, retried with backoff (``pipeline.retry``), ``kafka.deadletter_attempts`` times in all.
        True once it is out; after the last attempt an ERROR log naming the message (``origin``, else
        its interaction) and False: the one give-up policy. Either way the caller then acks the
        message, so one message never blocks its partition for ever. Never raises (but for
        cancellation)."""
        letter = dead_letter(
            stage=stage,
            error=error,
            payload=payload,
            origin=origin,
            source_topic=source_topic,
            interaction_id=interaction_id,
            original=original,
            failed_at=self.clock.now(),
            values=self.reasons_show_values,
        )
        where = (
            str(origin) if origin is not None else f"{letter.source_topic or stage} {interaction_id or ''}"
        )
        attempts = self.settings.kafka.deadletter_attempts
        tried = await retry(
            lambda: self.send_dead(letter),
            what=f"dead-lettering {where}",
            attempts=attempts,
            backoff=Backoff(first_s=self.retry_delay_s),
            sleep=self.clock.sleep,
        )
        if not tried.ok:
            log.error(
                "GIVING UP on %s: its dead letter (stage %s: %s) could not be sent after %d attempts; "
                "acking it so its partition moves on. Re-read it from that offset to recover it.",
                where, letter.stage, letter.error[:300], attempts,
            )  # fmt: skip
        return tried.ok


def new_context(settings: Settings, app: faust.App) -> StreamContext:
    return StreamContext(settings=settings, app=app, names=topic_names(settings.kafka))
