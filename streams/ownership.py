"""Which work this worker owns: the partitions of the ``touches`` topic the consumer group assigned it.

A series' windows (and its alert rules) belong to the owner of the partition of ``touch_key(app, model)``,
a conversation to the owner of ``touch_key(app, model, conversation_id)`` (``schemas.touch``); the key's
partition is the producer's own choice (murmur2, as Kafka's default partitioner), so what the sink sends
and what a new owner looks for in ClickHouse agree. The group decides, the worker follows:

* a revocation (the start of a rebalance) suspends the worker's closing: the close round under way ends
  after its batch (the revocation waits for it, a little), and no round begins until the next assignment;
* an assignment says which partitions it now owns: the work of partitions it lost is forgotten, that of
  partitions it gained is looked for in ClickHouse (``reconcile``), as a start does.

As with Kafka Streams' tasks, the owner acts; nothing else coordinates the workers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import faust
from aiokafka.partitioner import murmur2

from schemas.touch import touch_key
from streams.windows.closer import Owns

log = logging.getLogger(__name__)

#: called with the partitions gained and lost at an assignment
Rebalanced = Callable[[frozenset[int], frozenset[int]], Awaitable[None]]
#: called when a rebalance takes the partitions (before the group assigns them again)
Revoked = Callable[[], Awaitable[None]]


def partition_of(key: str, partitions: int) -> int:
    """The partition Kafka's default partitioner (and aiokafka's) gives ``key`` (UTF-8) among
    ``partitions``."""
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


class Ownership:
    """The partitions of ``topic`` this worker owns, and whose each key is. ``partitions``: the topic's
    partition count (the consumer's metadata once it has it)."""

    def __init__(self, topic: str, partitions: Callable[[], int]) -> None:
        self.topic = topic
        self._partitions = partitions
        self.owned: frozenset[int] = frozenset()
        self.suspended = True  # no assignment yet, or a rebalance under way: nothing is acted on
        self.assigned_once = False

    def owns_partition(self, partition: int) -> bool:
        return not self.suspended and partition in self.owned

    @property
    def rebalancing(self) -> bool:
        """A rebalance took this worker's partitions and has not assigned them again yet."""
        return self.suspended and self.assigned_once

    def lost(self, partition: int) -> bool:
        """An assignment since gave ``partition`` to another worker (what was read from it before is
        its new owner's). Not while a rebalance is under way: until the assignment says otherwise, the
        last one stands (its marks are forgotten then if the partition moved)."""
        return self.assigned_once and partition not in self.owned

    def owns_key(self, key: str) -> bool:
        return self.owns_partition(partition_of(key, self._partitions()))

    def owns(self, app: str, model: str, conversation_id: str | None = None, /) -> bool:
        """The windows (and alert rules) of ``app`` and ``model``, or one of their conversations."""
        return self.owns_key(touch_key(app, model, conversation_id))

    def within(self, partitions: frozenset[int]) -> Owns:
        """``owns``, for the keys of ``partitions`` only (those an assignment just gave)."""

        def owns(app: str, model: str, conversation_id: str | None = None, /) -> bool:
            key = touch_key(app, model, conversation_id)
            return self.owns_key(key) and partition_of(key, self._partitions()) in partitions

        return owns

    def revoke(self) -> None:
        self.suspended = True

    def assign(self, partitions: Iterable[int]) -> tuple[frozenset[int], frozenset[int]]:
        """The group assigned ``partitions`` of the topic; returns those gained and those lost."""
        now = frozenset(partitions)
        gained, lost = now - self.owned, self.owned - now
        self.owned = now
        self.suspended = False
        self.assigned_once = True
        return gained, lost


def follow_assignment(app: faust.App, ownership: Ownership, revoked: Revoked, rebalanced: Rebalanced) -> None:
    """Connect ``ownership`` to ``app``'s rebalance signals: ``revoked()`` runs when a rebalance takes the
    partitions, ``rebalanced(gained, lost)`` at each assignment (faust awaits both within the rebalance:
    keep them short)."""

    async def on_revoked(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        ownership.revoke()
        await revoked()

    async def on_assigned(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        assigned = set(args[0]) if args else set()
        mine = [tp.partition for tp in assigned if tp.topic == ownership.topic]
        gained, lost = ownership.assign(mine)
        if gained or lost:
            log.info("owner of %s partitions %s (gained %s, lost %s)", ownership.topic,
                     sorted(ownership.owned), sorted(gained), sorted(lost))  # fmt: skip
        await rebalanced(gained, lost)

    app.on_partitions_revoked.connect(cast(Any, on_revoked))
    app.on_partitions_assigned.connect(cast(Any, on_assigned))


def topic_partitions(app: faust.App, topic: str, default: int) -> Callable[[], int]:
    """The partition count of ``topic`` as the consumer's metadata has it (``default`` until it has)."""

    def count() -> int:
        try:
            found = app.consumer.topic_partitions(topic)
        except Exception:  # no consumer yet
            found = None
        return found or default

    return count
