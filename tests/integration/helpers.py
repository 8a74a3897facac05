"""Integration helpers: a worker subprocess with GROUNDWATCH_* env, topic readers, the report as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from groundwatch.local.stack import report_in_child
from groundwatch.local.supervise import WorkerProcess, spawn_worker
from groundwatch.local.tansu import worker_env
from groundwatch.trend_report import Report
from pipeline.net import free_port
from schemas.settings import Settings, settings_from_env
from streams.status import WorkerStatus, read_status
from streams.topics import bootstrap_servers

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Deployment:
    """One isolated groundwatch deployment on the shared broker: its own topics, group and chDB path."""

    broker_url: str
    workdir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:8]}.")

    @property
    def status_file(self) -> Path:
        return self.workdir / "status.json"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWATCH_")}
        env.update(worker_env(self.broker_url))
        env.update(
            {
                "GROUNDWATCH_KAFKA__TOPIC_PREFIX": self.prefix,
                "GROUNDWATCH_KAFKA__CONSUMER_GROUP": f"{self.prefix}group",
                "GROUNDWATCH_KAFKA__PARTITIONS": "2",
                "GROUNDWATCH_KAFKA__JOIN_TIMEOUT_S": "30",
                "GROUNDWATCH_KAFKA__DATADIR": str(self.workdir / "faust"),
                "GROUNDWATCH_CLICKHOUSE__URL": f"chdb://{self.workdir / 'chdb'}",
                "GROUNDWATCH_CLICKHOUSE__STATUS_FILE": str(self.status_file),
                "GROUNDWATCH_CLICKHOUSE__BATCH_SECONDS": "0.5",
                "GROUNDWATCH_JUDGE__KIND": "lexical",
                "GROUNDWATCH_WINDOW__SIZE_SECONDS": "2",
                "GROUNDWATCH_WINDOW__GRACE_SECONDS": "1",
                "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "2",
                "GROUNDWATCH_WINDOW__TICK_SECONDS": "0.5",
                "PYTHONPATH": str(REPO),
            }
        )
        env.update(self.extra_env)
        return env

    def settings(self) -> Settings:
        return settings_from_env(self.env())

    def start_worker(self, name: str = "worker") -> WorkerProcess:
        env = self.env()
        env["GROUNDWATCH_KAFKA__WEB_PORT"] = str(free_port())
        return spawn_worker(env, self.workdir / f"{name}.log", self.status_file, cwd=self.workdir)

    def status(self) -> WorkerStatus | None:
        return read_status(self.status_file)

    def evaluations_in_clickhouse(self) -> int:
        status = self.status()
        return status.counts.get("evaluations", 0) if status else 0

    def report(self) -> Report:
        """`groundwatch report --json` in a subprocess (after the worker stopped: chDB is single-process)."""
        return report_in_child(self.env(), self.workdir, timeout_s=120)

    def read_topic(self, name: str, *, expect: int | None = None, idle_s: float = 3.0) -> list[Any]:
        return asyncio.run(read_topic(self.broker_url, self.prefix + name, expect=expect, idle_s=idle_s))


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
