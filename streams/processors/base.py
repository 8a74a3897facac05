"""A stream processor: one input topic, one pydantic input model, one stage name.

A processor decodes each event (a message that does not validate raises ``InvalidMessage``), waits for
the worker's resources, and runs ``process``, which sends its output or raises. Every failure goes the
same way: ``streams.runner.run_bounded`` logs it and ``StreamContext.dead_letter`` turns it into a dead
letter with the stage, the reason and the original message and sends it (or gives up); the event is
acked after that. Events are
handled concurrently (``kafka.stage_concurrency``) and acked in offset order.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from schemas.errors import InvalidMessage
from schemas.results import Stage
from streams.codec import Origin, decode, stage_of
from streams.context import StreamContext
from streams.resources import Resources
from streams.runner import run_bounded

log = logging.getLogger(__name__)

In = TypeVar("In", bound=BaseModel)


def event_key(event: Any) -> str | None:
    key = getattr(event, "key", None)
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else None


def record_time(event: Any) -> datetime | None:
    """The Kafka record's timestamp (seconds in faust), the same at every redelivery; None without one."""
    seconds = getattr(getattr(event, "message", None), "timestamp", None)
    if not isinstance(seconds, int | float) or seconds <= 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


class Processor(ABC, Generic[In]):
    name: ClassVar[str]  # the faust agent's name
    stage: ClassVar[Stage]  # what failures are filed under
    input_model: ClassVar[type[BaseModel]]
    #: False when another processor reads the same topic and dead-letters its invalid messages: this one
    #: then counts and skips them, so each bad message has exactly one dead letter
    dead_letters_invalid: ClassVar[bool] = True

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        self.skipped_invalid = 0

    @property
    @abstractmethod
    def source_topic(self) -> str: ...

    @abstractmethod
    async def process(self, message: In) -> None:
        """Handle one decoded message: send the output, or raise."""

    async def handle(self, event: Any) -> None:
        self.ctx.metrics.events_in.labels(self.stage).inc()
        try:
            message: In = decode(  # type: ignore[assignment]
                event.value, self.input_model, self.ctx.settings.limits, received_at=record_time(event)
            )
        except InvalidMessage:
            if self.dead_letters_invalid:
                raise
            self.skipped_invalid += 1
            log.debug("%s: skipped an invalid message (dead-lettered by the other reader)", self.name)
            return
        await self.resources.wait_ready()
        await self.process(message)
        self.ctx.metrics.events_out.labels(self.stage).inc()

    def letter_payload(self, event: Any, exc: Exception) -> bytes | str:
        """What a dead letter of this event carries: the message as read."""
        return event.value

    async def on_error(self, event: Any, exc: Exception) -> None:
        await self.ctx.dead_letter(
            exc,
            stage_of(exc, self.stage),
            self.letter_payload(event, exc),
            origin=Origin.of_event(event),
            source_topic=self.source_topic,
            interaction_id=event_key(event),
        )

    def register(self) -> Any:
        kafka = self.ctx.settings.kafka

        async def agent(stream: Any) -> None:
            await run_bounded(
                stream,
                self.handle,
                kafka.stage_concurrency,
                on_error=self.on_error,
            )

        agent.__name__ = agent.__qualname__ = self.name.rsplit(".", 1)[-1] + "_agent"
        return self.ctx.app.agent(self.ctx.topic(self.source_topic), name=self.name)(agent)
