"""A stream processor: one input topic, one pydantic input model, one stage name.

A processor decodes each event (a message that does not validate raises ``InvalidMessage``), waits for
the worker's resources, and runs ``process``, which sends its output or raises. Every failure goes the
same way: ``streams.runner.run_bounded`` logs it and ``StreamContext.dead_letter`` turns it into a dead
letter with the stage, the reason and the original message and sends it (or gives up); the event is
acked after that. Events are
handled concurrently (``kafka.stage_concurrency``) and acked in offset order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from schemas.errors import GroundwatchError
from schemas.results import Stage
from streams.codec import Origin, decode, stage_of
from streams.context import StreamContext
from streams.resources import Resources
from streams.runner import run_bounded

In = TypeVar("In", bound=BaseModel)


class StageFailures(GroundwatchError):
    """Stages of one message that failed apart (``streams.processors.judge``): each is dead-lettered
    under its own stage with its own error."""

    def __init__(self, failures: list[tuple[Stage, Exception]]) -> None:
        super().__init__("; ".join(f"{stage}: {type(e).__name__}: {e}" for stage, e in failures))
        self.failures = failures


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
    #: the input topic lies between the worker's stages (``streams.codec.decode``'s ``between_stages``)
    between_stages: ClassVar[bool] = False

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources

    @property
    @abstractmethod
    def source_topic(self) -> str: ...

    @abstractmethod
    async def process(self, message: In) -> None:
        """Handle one decoded message: send the output, or raise."""

    async def handle(self, event: Any) -> None:
        self.ctx.metrics.events_in.labels(self.stage).inc()
        message: In = decode(  # type: ignore[assignment]
            event.value,
            self.input_model,
            self.ctx.settings.limits,
            now=self.ctx.clock.now(),
            received_at=record_time(event),
            between_stages=self.between_stages,
            values=self.ctx.reasons_show_values,
        )
        await self.resources.wait_ready()
        await self.process(message)
        self.ctx.metrics.events_out.labels(self.stage).inc()

    def letter_payload(self, event: Any, exc: Exception) -> bytes | str | None:
        """What a dead letter of this event carries: the message as read."""
        return event.value

    async def on_error(self, event: Any, exc: Exception) -> None:
        """Dead-letter the message under the failing stage; stages that failed apart (``StageFailures``)
        get one dead letter each."""
        failures = exc.failures if isinstance(exc, StageFailures) else [(stage_of(exc, self.stage), exc)]
        for stage, error in failures:
            await self.ctx.dead_letter(
                error,
                stage,
                self.letter_payload(event, error),
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
