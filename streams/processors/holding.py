"""The consuming side of a processor that holds messages until an outcome (the join, the OTLP reader).

Such a processor reads its input topics raw and unacked, hands each event with its ack ticket to
``handle``, settles what is ready or expired in a task pool, and acks in offset order (``OrderedAcks``)
only once the outcome is durable. What is shared lives here once: the agent registration (with the
revoke hook that forgets a lost partition's held messages), the consume loop (an event whose handling
fails unexpectedly is dead-lettered with the error and acked, like any failed message, so it never
blocks its partition and never kills the agent) and the expiry loop on the worker's clock (a failing
expiry is logged and the loop goes on).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from pipeline.clock import Clock
from schemas.results import Stage
from streams.acks import OrderedAcks, Ticket
from streams.codec import Origin
from streams.context import StreamContext
from streams.revoke import forget_on_revoke
from streams.task_pool import TaskPool

log = logging.getLogger(__name__)


class HoldingProcessor(ABC):
    name: str
    stage: Stage
    ctx: StreamContext
    clock: Clock
    acks: OrderedAcks
    pool: TaskPool

    @property
    @abstractmethod
    def inputs(self) -> list[str]:
        """The topics it reads."""

    @property
    @abstractmethod
    def hold_s(self) -> float:
        """How long a message is held at most; the expiry loop looks four times as often (0.05-1 s)."""

    @abstractmethod
    async def handle(self, event: Any, ticket: Ticket) -> None:
        """Take one event; its ticket is acked once its outcome is durable."""

    @abstractmethod
    async def expire_due(self) -> int:
        """Settle what has been held too long; return how many."""

    @abstractmethod
    def forget(self, tps: Iterable[Any]) -> int:
        """Drop what is held from partitions this worker lost; return how many."""

    async def expire_loop(self) -> None:
        tick = max(0.05, min(1.0, self.hold_s / 4))
        while True:
            await self.clock.sleep(tick)
            try:
                await self.expire_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: logged; the next tick tries again (never ends the loop)
                log.exception("%s: expiring held messages failed", self.stage)

    async def consume(self, stream: Any) -> None:
        expirer = asyncio.create_task(self.expire_loop())
        try:
            async for event in stream.noack().events():
                ticket = self.acks.track(event)
                try:
                    await self.handle(event, ticket)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a bug: the message is dead-lettered with it (the agent goes on)
                    log.exception(
                        "%s: handling %s offset %s failed; dead-lettering it",
                        self.stage,
                        event.message.topic,
                        ticket.offset,
                    )
                    await self.ctx.dead_letter(
                        exc,
                        self.stage,
                        event.value,
                        origin=Origin.of(ticket.tp, ticket.offset),
                        source_topic=event.message.topic,
                    )
                    self.acks.done(ticket)
        finally:
            expirer.cancel()
            await self.pool.cancel()  # unfinished outcomes stay unacked and come back

    def register(self) -> Any:
        forget_on_revoke(self.ctx.app, self.name, self.forget, self.acks.forget)
        source = self.ctx.app.topic(
            *self.inputs,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=self.ctx.settings.kafka.partitions,
        )
        return self.ctx.app.agent(source, name=self.name)(self.consume)
