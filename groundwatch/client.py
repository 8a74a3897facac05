"""A small client an app calls with each interaction, to send it to groundwatch's interactions topic:

    from groundwatch.client import GroundwatchClient

    client = GroundwatchClient()            # the Kafka settings from GROUNDWATCH_KAFKA__* (as the worker)
    client.send({"question": ..., "answer": ..., "contexts": [...], "steps": [...]})  # or an Interaction
    ...
    client.close()                          # at shutdown: sends what is buffered (bounded wait)

``send`` never blocks on the network and never raises into the app's request path: it serialises the
interaction (a snapshot: the app may change its dict afterwards) into a bounded buffer and returns
whether it was taken. A background thread, with an event loop of its own, sends the buffer in batches
with aiokafka (key: the interaction id, a new random one when the interaction has none; a missing
timestamp is stamped with the time of ``send``, as ``groundwatch replay`` does:
``groundwatch.replay.prepare``). Past ``max_buffered`` interactions or
``max_buffer_bytes`` bytes waiting (the broker is down or slow), new ones are dropped: counted in
``stats.dropped`` and logged (the first drop, then every time the count doubles). A batch the broker does
not take is counted in ``stats.failed`` and logged; a broker unreachable at start is retried with
``pipeline.retry.Backoff``. Validation stays in the worker: an invalid interaction is dead-lettered there
with the reason, as for any producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections import deque
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from groundwatch.replay import prepare
from pipeline.clock import SYSTEM_CLOCK, Clock
from pipeline.retry import Backoff
from schemas.settings import KafkaSettings, settings_from_env
from streams.kafka_auth import aiokafka_auth
from streams.topics import bootstrap_servers, topic_names

log = logging.getLogger(__name__)

#: how long ``close`` waits for the sender at a time before it reads its clock again
JOIN_STEP_S = 0.05


@dataclass
class ClientStats:
    """What the client did: taken by ``send``, delivered to the broker, dropped (buffer full, or not
    serialisable), failed (the broker did not take them)."""

    taken: int = 0
    sent: int = 0
    dropped: int = 0
    failed: int = 0


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")


class GroundwatchClient:
    def __init__(
        self,
        kafka: KafkaSettings | None = None,
        *,
        max_buffered: int = 10_000,
        max_buffer_bytes: int = 64 * 1024 * 1024,
        batch_size: int = 500,
        linger_s: float = 0.05,
        backoff: Backoff | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.kafka = kafka or settings_from_env(os.environ).kafka
        self.topic = topic_names(self.kafka).interactions
        self.max_buffered = max_buffered
        self.max_buffer_bytes = max_buffer_bytes
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.backoff = backoff or Backoff(first_s=0.5, max_s=30.0)
        self.clock = clock
        self.stats = ClientStats()
        self._buffer: deque[tuple[bytes | None, bytes]] = deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()  # set while nothing is buffered nor in flight
        self._idle.set()
        self._closing = False
        self._next_drop_log = 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="groundwatch-client", daemon=True)
        self._thread.start()

    # ---- the app's side: never blocks, never raises ----------------------------------------------------
    def send(self, interaction: dict[str, Any] | BaseModel) -> bool:
        """Buffer one interaction for the background sender; False when it was dropped (the buffer is
        full, the client is closed, or it cannot be serialised: counted in ``stats.dropped``)."""
        try:
            if isinstance(interaction, BaseModel):
                line = interaction.model_dump_json()
            else:
                line = json.dumps(interaction, default=_json_default)
            limit = self.kafka.max_message_bytes
            if len(line) > limit:  # characters: at least as many bytes; checked before it is parsed again
                with self._lock:
                    return self._drop(
                        f"it is {len(line):,} characters as JSON, over kafka.max_message_bytes ({limit:,})"
                    )
            key, value = prepare(line, ensure_id=True)
            with self._lock:
                if (
                    self._closing
                    or len(self._buffer) >= self.max_buffered
                    or (self._bytes + len(value) > self.max_buffer_bytes)
                ):
                    return self._drop("the client is closed" if self._closing else "the buffer is full")
                self._buffer.append((key.encode("utf-8") if key else None, value))
                self._bytes += len(value)
                self.stats.taken += 1
                self._idle.clear()
            self._wake.set()
            return True
        except Exception as exc:  # (never into the app's request path)
            with self._lock:
                return self._drop(f"it cannot be sent: {type(exc).__name__}: {exc}")

    def _drop(self, why: str) -> bool:
        """Count a drop (the lock held); log the first, then each time the count doubles."""
        self.stats.dropped += 1
        if self.stats.dropped >= self._next_drop_log:
            self._next_drop_log *= 2
            log.warning(
                "groundwatch client: interaction dropped (%s); %d dropped so far", why, self.stats.dropped
            )
        return False

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait (at most ``timeout_s``) until everything buffered was sent or given up; True when so."""
        self._wake.set()
        return self._idle.wait(timeout_s)

    def close(self, timeout_s: float = 10.0) -> bool:
        """Stop taking interactions, send what is buffered and stop the sender, all within one deadline
        ``timeout_s`` away on the client's clock; past it, a sender still busy (a broker that does not
        answer) is cancelled and what was not sent is dropped (counted). True when nothing was left
        unsent."""
        deadline = self.clock.monotonic() + timeout_s
        with self._lock:
            self._closing = True
        self._wake.set()
        stopped = self._join_by(deadline)
        if not stopped:
            self._cancel_sender()
        with self._lock:
            left = len(self._buffer)
            if left:
                self._buffer.clear()
                self._bytes = 0
                self.stats.dropped += left
                log.warning("groundwatch client: closed with %d interactions unsent (dropped)", left)
        return stopped and not left

    def _join_by(self, deadline: float) -> bool:
        """Wait for the sender to end (it does once closing and nothing is buffered), until ``deadline``
        on the client's clock; True when it ended."""
        while self._thread.is_alive():
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                return False
            self._thread.join(min(remaining, JOIN_STEP_S))
        return True

    def _cancel_sender(self) -> None:
        """Cancel the sender's task on its own loop (without waiting): its batch in flight is counted
        failed, its producer stopped, its thread ends."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop has just closed: the sender ended
                loop.call_soon_threadsafe(task.cancel)

    def __enter__(self) -> GroundwatchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the background sender ------------------------------------------------------------------------
    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # cancelled by a close past its deadline
            asyncio.run(self._sender())

    def _take(self) -> list[tuple[bytes | None, bytes]]:
        with self._lock:
            batch = [self._buffer.popleft() for _ in range(min(self.batch_size, len(self._buffer)))]
            self._bytes -= sum(len(v) for _, v in batch)
            return batch

    async def _wait_wake(self, timeout_s: float) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._wake.wait, timeout_s)
        self._wake.clear()

    async def _start(self) -> AIOKafkaProducer | None:
        failures = 0
        while True:
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap_servers(self.kafka.broker),
                acks="all",
                linger_ms=int(self.linger_s * 1000),
                **aiokafka_auth(self.kafka),
            )
            try:
                await producer.start()
                return producer
            except asyncio.CancelledError:  # closed past its deadline while the broker did not answer
                await producer.stop()
                raise
            except Exception as exc:
                await producer.stop()
                failures += 1
                wait = self.backoff.delay(failures, exc)
                log.warning("groundwatch client: the broker is not reachable (%s); again in %.1fs", exc, wait)
                if self._closing:
                    return None
                await self._wait_wake(wait)

    async def _sender(self) -> None:
        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        producer = await self._start()
        try:
            while producer is not None:
                batch = self._take()
                if batch:
                    await self._deliver(producer, batch)
                    continue
                with self._lock:
                    if not self._buffer:
                        self._idle.set()
                    if self._closing and not self._buffer:
                        return
                await self._wait_wake(1.0)
        finally:
            if producer is not None:
                await producer.stop()
            self._idle.set()

    async def _deliver(self, producer: AIOKafkaProducer, batch: list[tuple[bytes | None, bytes]]) -> None:
        futures = []
        for key, value in batch:
            try:
                futures.append(await producer.send(self.topic, value=value, key=key))
            except Exception as exc:
                futures.append(asyncio.get_running_loop().create_future())
                futures[-1].set_exception(exc)
        try:
            results = await asyncio.gather(*futures, return_exceptions=True)
        except asyncio.CancelledError:  # closed past its deadline: the broker never confirmed them
            with self._lock:
                self.stats.failed += len(batch)
            raise
        failed = [r for r in results if isinstance(r, BaseException)]
        with self._lock:
            self.stats.sent += len(results) - len(failed)
            self.stats.failed += len(failed)
        if failed:
            log.warning(
                "groundwatch client: %d interactions not taken by the broker: %s", len(failed), failed[0]
            )
