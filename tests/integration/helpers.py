"""Integration helpers: a deployment on the shared broker (``groundwatch.local.stack.LocalStack``), topic
readers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from groundwatch.local.stack import LocalStack
from streams.topics import bootstrap_servers

REPO = Path(__file__).resolve().parents[2]


#: the settings of a test deployment on top of the stack's (lexical judge, short windows, quick ticks)
TEST_ENV = {
    "GROUNDWATCH_KAFKA__JOIN_TIMEOUT_S": "30",
    "GROUNDWATCH_CLICKHOUSE__BATCH_SECONDS": "0.5",
    "GROUNDWATCH_JUDGE__KIND": "lexical",
    "GROUNDWATCH_WINDOW__TICK_SECONDS": "0.5",
    "GROUNDWATCH_KAFKA__PROCESSES": "1",  # a test that wants more says so
    "PYTHONPATH": str(REPO),
}


def fake_judge(base_url: str, quick_retries: bool = False) -> dict[str, str]:
    """The settings of an OpenAI-compatible judge at ``base_url`` (the scripted fake server,
    tests/fakes/openai_server.py), its verdict cache off; with ``quick_retries``, one retry 10-50 ms
    later."""
    env = {
        "GROUNDWATCH_JUDGE__KIND": "openai",
        "GROUNDWATCH_JUDGE__BASE_URL": base_url,
        "GROUNDWATCH_JUDGE__API_KEY": "test-key",
        "GROUNDWATCH_JUDGE__MODEL": "fake-model",
        "GROUNDWATCH_JUDGE__CACHE_ENABLED": "false",
    }
    if quick_retries:
        env |= {
            "GROUNDWATCH_JUDGE__MAX_RETRIES": "1",
            "GROUNDWATCH_JUDGE__BACKOFF_BASE_S": "0.01",
            "GROUNDWATCH_JUDGE__BACKOFF_MAX_S": "0.05",
        }
    return env


def deployment(broker_url: str, workdir: Path, extra_env: dict[str, str] | None = None) -> LocalStack:
    """One isolated groundwatch deployment on the shared broker (its own topics, group and chDB path):
    a ``LocalStack`` on that broker, with none of the caller's GROUNDWATCH_* settings, ``TEST_ENV`` and
    ``extra_env`` (whose GROUNDWATCH_CLICKHOUSE__URL, if any, replaces the embedded chDB)."""
    extra = dict(extra_env or {})
    clickhouse_url = extra.pop("GROUNDWATCH_CLICKHOUSE__URL", None)
    return LocalStack(
        workdir,
        {**TEST_ENV, **extra},
        partitions=2,
        window_seconds=2,
        broker_url=broker_url,
        clickhouse_url=clickhouse_url,
        inherit_settings=False,
    )


def topic_of(dep: LocalStack, name: str, *, expect: int | None = None, idle_s: float = 3.0) -> list[Any]:
    """Every message on the deployment's topic ``name`` (``read_topic``)."""
    return asyncio.run(read_topic(dep.broker_url, dep.prefix + name, expect=expect, idle_s=idle_s))


async def read_topic(broker_url: str, topic: str, *, expect: int | None, idle_s: float) -> list[Any]:
    """Every message on the topic from the start (JSON values), until ``expect`` arrived and nothing more
    came for ``idle_s``, or nothing came at all for ``idle_s`` (reading more would find duplicates too)."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers(broker_url),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[Any] = []
    try:
        last = time.monotonic()
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            got = [json.loads(m.value) for msgs in batch.values() for m in msgs if m.value is not None]
            if got:
                out.extend(got)
                last = time.monotonic()
            elif time.monotonic() - last >= idle_s and (expect is None or len(out) >= expect):
                break
            elif time.monotonic() - last >= max(idle_s, 30.0):
                break
    finally:
        await consumer.stop()
    return out


def jsonl(records: Iterable[dict[str, Any]]) -> list[str]:
    return [json.dumps(r) for r in records]
