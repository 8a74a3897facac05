"""Produce interactions from a JSONL file onto the interactions topic (aiokafka; key = interaction_id)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from schemas.json_input import read_json
from schemas.settings import Settings
from streams.kafka_auth import aiokafka_auth
from streams.topics import bootstrap_servers, ensure_topics, topic_names

log = logging.getLogger(__name__)

#: deeper lines are sent untouched (the worker dead-letters them); parsing them here could recurse
MAX_REPLAY_DEPTH = 256


@dataclass
class ReplayResult:
    sent: int  # lines that are not JSON objects are sent too: the worker dead-letters them with the reason
    seconds: float


def read_lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield line.rstrip("\n")


def prepare(
    line: str,
    *,
    app: str | None = None,
    model: str | None = None,
    stamp: bool = True,
    ensure_id: bool = False,
) -> tuple[str | None, bytes]:
    """(key, value) for one input line. Overrides app/model when given and stamps the produce time when
    the record has no timestamp (so a redelivery keeps its window); with ``ensure_id`` (the app's client)
    a record without ``interaction_id`` or ``id`` gets a new random one. A line that is not a JSON
    object is passed through untouched: validation happens in the worker, which dead-letters it with the
    reason."""
    try:
        data: Any = read_json(line, MAX_REPLAY_DEPTH)
    except ValueError:  # not JSON, or nested too deep to parse safely: the worker says why
        return None, line.encode("utf-8")
    if not isinstance(data, dict):
        return None, line.encode("utf-8")
    if app is not None:
        data["app"] = app
    if model is not None:
        data["model"] = model
    if stamp and not data.get("timestamp"):
        data["timestamp"] = datetime.now(UTC).isoformat()
    if ensure_id and data.get("interaction_id") is None and data.get("id") is None:
        data["interaction_id"] = uuid.uuid4().hex
    key = data.get("interaction_id", data.get("id"))
    return (str(key) if key is not None else None), json.dumps(data).encode("utf-8")


async def _delivered(pending: list[asyncio.Future[Any]]) -> None:
    """Wait for these deliveries (raising the first failure) and clear the list."""
    try:
        for fut in pending:
            await fut
    finally:
        pending.clear()


async def replay(
    settings: Settings,
    lines: Iterable[str],
    *,
    rate: float | None = None,
    app: str | None = None,
    model: str | None = None,
    limit: int | None = None,
    create_topics: bool = True,
    chunk: int = 1000,
) -> ReplayResult:
    """Send each line (at most ``rate`` a second when given); wait until the broker has them all.
    Delivery futures are awaited every ``chunk`` messages (a failed send raises there)."""
    if create_topics:
        await ensure_topics(settings.kafka)
    topic = topic_names(settings.kafka).interactions
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers(settings.kafka.broker),
        acks="all",
        **aiokafka_auth(settings.kafka),
    )
    await producer.start()
    started = time.monotonic()
    sent = 0
    try:
        pending: list[asyncio.Future[Any]] = []
        for line in lines:
            if limit is not None and sent >= limit:
                break
            key, value = prepare(line, app=app, model=model)
            pending.append(await producer.send(topic, value=value, key=key.encode("utf-8") if key else None))
            sent += 1
            if len(pending) >= chunk:  # wait for the broker in chunks: memory stays bounded, errors surface
                await _delivered(pending)
            if rate:
                delay = started + sent / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
        await producer.flush()
        await _delivered(pending)
    finally:
        await producer.stop()
    return ReplayResult(sent=sent, seconds=time.monotonic() - started)
