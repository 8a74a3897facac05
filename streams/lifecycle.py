"""The worker's stop: when the broker loses its topics, and when a stop takes too long.

A broker that comes back with empty storage (a restart with a fresh data directory, an in-memory broker)
has none of groundwatch's topics, no consumer-group offsets, and offsets that start again at 0. faust
and aiokafka do not recover from that: the consumer keeps committing to partitions that no longer
exist (``OffsetCommit failed ... UnknownTopicOrPartitionError``, retried without end) and nothing
recreates the topics. ``BrokerWatch`` lists the broker's topics every ``kafka.topic_check_seconds``; when
one of ours is missing, or has another partition count than at the first check, at two checks in a row,
the worker writes what its sink holds and ends with one line (``groundwatch worker: BrokerUnavailable:
...``) and exit code 2, and its supervisor starts it again: the new start recreates the topics
(``streams.topics.ensure_topics``) with a fresh consumer. It does not attempt faust's graceful stop,
which cannot succeed then (its final commit waits on aiokafka retrying the commit to partitions that no
longer exist, for ever); the windows it did not close are recomputed at the next start
(``WindowCloser.reconcile``). A broker that cannot be reached is not a loss: aiokafka reconnects, the
check waits.

``ShutdownDeadline`` bounds every stop: ``kafka.shutdown_timeout_s`` after the stop began (a signal or
a SIGINT), a thread ends the process with one line and exit code 2 (a final commit or send to a broker
that lost its partitions can otherwise wait for ever). Nothing is lost by that: events are acked only
once their outputs are written, so whatever was not acked is read again at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from mode import Service

from schemas.errors import BrokerUnavailable
from schemas.safe_text import safe_text
from schemas.settings import KafkaSettings
from streams.kafka_auth import aiokafka_auth
from streams.topics import bootstrap_servers, topic_names

log = logging.getLogger(__name__)

#: checks in a row that must find the topics lost before the worker stops (one could race a deletion
#: and re-creation by an operator)
STRIKES = 2


def lost_topics(baseline: Mapping[str, int], seen: Mapping[str, int]) -> list[str]:
    """Our topics missing from ``seen`` (topic -> partitions on the broker now), or with another
    partition count than in ``baseline`` (the counts at the first check), each with what changed."""
    lost = []
    for topic, partitions in sorted(baseline.items()):
        now = seen.get(topic)
        if now is None:
            lost.append(f"{topic} (gone)")
        elif now != partitions:
            lost.append(f"{topic} ({partitions} -> {now} partitions)")
    return lost


def describe_loss(lost: list[str]) -> str:
    """``a, b (gone)`` rather than ``a (gone), b (gone)``: one short line."""
    gone = [t.removesuffix(" (gone)") for t in lost if t.endswith(" (gone)")]
    changed = [t for t in lost if not t.endswith(" (gone)")]
    return "; ".join(x for x in (", ".join(gone) + " (gone)" if gone else "", ", ".join(changed)) if x)


class BrokerWatch(Service):
    """Lists the broker's topics every ``kafka.topic_check_seconds``; calls ``on_lost`` once, with a
    BrokerUnavailable, when ours are lost at ``STRIKES`` checks in a row."""

    def __init__(
        self,
        kafka: KafkaSettings,
        on_lost: Callable[[BrokerUnavailable], Awaitable[None]],
        list_topics: Callable[[], Awaitable[Mapping[str, int]]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka = kafka
        self.on_lost = on_lost
        self.topics = topic_names(kafka).all()
        self._list = list_topics or self._list_from_broker
        self._admin: AIOKafkaAdminClient | None = None
        self.baseline: dict[str, int] | None = None
        self.strikes = 0
        self.fired = False

    async def _list_from_broker(self) -> Mapping[str, int]:
        if self._admin is None:
            self._admin = AIOKafkaAdminClient(
                bootstrap_servers=bootstrap_servers(self.kafka.broker),
                request_timeout_ms=int(max(1.0, self.kafka.topic_check_seconds) * 1000),
                **aiokafka_auth(self.kafka),
            )
            await self._admin.start()
        # all topics (a metadata request naming a topic could make the broker auto-create it)
        metadata = await self._admin._client.fetch_all_metadata()
        return {t: len(metadata.partitions_for_topic(t) or ()) for t in metadata.topics()}

    async def check(self) -> list[str]:
        """One check; returns the topics found lost (empty when all is well or the broker is away)."""
        try:
            seen = await asyncio.wait_for(self._list(), timeout=max(1.0, self.kafka.topic_check_seconds))
        except Exception as exc:  # unreachable or slow: not a loss; aiokafka reconnects
            log.debug("broker watch: could not list the topics: %r", exc)
            return []
        ours = {t: n for t, n in seen.items() if t in self.topics}
        if self.baseline is None:
            if len(ours) == len(self.topics):
                self.baseline = ours
            return []
        lost = lost_topics(self.baseline, ours)
        self.strikes = self.strikes + 1 if lost else 0
        if lost and self.strikes >= STRIKES and not self.fired:
            self.fired = True
            await self.on_lost(self.error(lost))
        return lost

    def error(self, lost: Iterable[str]) -> BrokerUnavailable:
        from streams.clickhouse.client import redact_url

        broker = redact_url(self.kafka.broker)
        return BrokerUnavailable(
            f"the broker {broker} lost groundwatch's topics {describe_loss(list(lost))} "
            "(restarted with empty storage?); the worker stops so that its supervisor starts it again, "
            "which recreates them. Interactions the broker lost before they were evaluated must be sent "
            "again"
        )

    @Service.task
    async def _watch(self) -> None:
        while not self.should_stop and not self.fired:
            await self.sleep(self.kafka.topic_check_seconds)
            if not self.should_stop:
                await self.check()

    async def on_stop(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._admin.close(), timeout=5.0)
            self._admin = None


def exit_line(what: str, why: str) -> str:
    """One line in the CLI's form (groundwatch.cli): ``groundwatch worker: <what>: <why>``."""
    return f"groundwatch worker: {safe_text(what)}: {safe_text(why, 2000)}"


def end_process(line: str, code: int = 2) -> None:
    """Log ``line``, write it to stderr, and end the process now (no graceful stop: what was not acked
    is read again at the next start)."""
    with contextlib.suppress(Exception):
        if logging.getLogger().handlers:  # (without any, logging would print it to stderr itself)
            log.critical("%s", line)
        for handler in logging.getLogger().handlers:
            handler.flush()
    err = sys.__stderr__ or sys.stderr  # faust redirects sys.stderr into its logger
    with contextlib.suppress(Exception):
        err.write(line + "\n")
        err.flush()
    os._exit(code)


class ShutdownDeadline:
    """``arm()`` when a stop begins: ``timeout_s`` later, if the process still runs, end it with one
    line and exit code 2 (``end_process``)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.timeout_s, self.expire)
            self._timer.daemon = True
            self._timer.start()

    def expire(self) -> None:
        end_process(
            exit_line(
                "ShutdownTimeout",
                f"the worker did not stop within kafka.shutdown_timeout_s={self.timeout_s:g}s; ending it "
                "now (events not acked yet are read again at the next start)",
            )
        )
