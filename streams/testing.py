"""A harness for testing processors without a broker, shipped with the package (as ``bytewax.testing``
ships its own): a topic that records what is sent, an event and a stream shaped as faust's, the
worker's ``ManualClock``, and a ``StreamContext`` wired to them.

    ctx = fake_context(settings)
    await SomeProcessor(ctx, resources).handle(Event(b"{...}"))
    assert ctx.topics[ctx.names.deadletter].sent
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from faust.types import TP

from pipeline.clock import ManualClock
from schemas.settings import Settings
from streams.context import StreamContext, new_context

__all__ = ["Event", "ManualClock", "Message", "RecordMetadata", "Stream", "Topic", "fake_context"]


class Topic:
    """A faust topic: ``send`` records the value and hands back its delivery (the record's metadata: this
    topic's ``name``, partition 0, the next offset), which fails (the broker refused it) while ``fail`` is
    set; ``tried`` counts every send."""

    def __init__(self, name: str = "t") -> None:
        self.name = name
        self.fail = False
        self.tried = 0
        self.sent: list[bytes] = []
        self.keys: list[bytes | None] = []

    async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        self.tried += 1
        delivery: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.fail:
            delivery.set_exception(ConnectionError("the broker refused the message"))
        else:
            self.sent.append(value)
            self.keys.append(key)
            delivery.set_result(RecordMetadata(self.name, 0, len(self.sent) - 1))
        return delivery


@dataclass(frozen=True)
class RecordMetadata:
    """Where the broker wrote a record (the fields of aiokafka's ``RecordMetadata`` a sender reads)."""

    topic: str
    partition: int
    offset: int


@dataclass
class Message:
    """The Kafka record under a faust event: where it was read and its timestamp (seconds)."""

    topic: str = "t"
    partition: int = 0
    offset: int = 0
    timestamp: float | None = None

    @property
    def tp(self) -> TP:
        return TP(self.topic, self.partition)


@dataclass
class Event:
    """A faust event: its value and key, the record it came from, and ``ack()``, which records the
    event's (topic, offset) in ``acked`` (share one list among events to see the order of acks)."""

    value: bytes | None
    key: bytes | None = None
    message: Message = field(default_factory=Message)
    acked: list[tuple[str, int]] = field(default_factory=list)

    @classmethod
    def at(cls, topic: str, offset: int, value: bytes | None, acked: list[tuple[str, int]]) -> Event:
        """The event of the record at ``offset`` of ``topic``'s partition 0, acking into ``acked``."""
        return cls(value, message=Message(topic, 0, offset), acked=acked)

    def ack(self) -> bool:
        self.acked.append((self.message.topic, self.message.offset))
        return True


class Stream:
    """The faust stream ``streams.runner.run_bounded`` consumes: ``noack().events()``; the events get
    consecutive offsets from 0; ``pulled`` counts the events handed out."""

    def __init__(self, events: Sequence[Event]) -> None:
        self._events = list(events)
        self.pulled = 0

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Event]:
        for offset, event in enumerate(self._events):
            read = event.message
            event.message = Message(read.topic, read.partition, offset, read.timestamp)
            self.pulled += 1
            yield event


def fake_context(settings: Settings, clock: ManualClock | None = None) -> StreamContext:
    """A ``StreamContext`` whose every topic is a ``Topic`` and whose clock is a ``ManualClock``."""
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    for name in ctx.names.all():
        ctx.topics[name] = Topic(name)
    ctx.clock = clock or ManualClock()
    return ctx
