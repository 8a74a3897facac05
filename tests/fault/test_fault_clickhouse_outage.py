"""ClickHouse cannot write for a while (a real filesystem failure of the embedded chDB), on the real Tansu
broker and chDB.

The outage: every table directory of the worker's chDB path is made immutable (``chattr +i``, which
stops root too), so each insert fails inside the engine with a filesystem error (``Operation not
permitted`` creating the new part) while reads still answer, as a full or read-only disk does. Nothing
of groundwatch is replaced: the worker's own sink, store and engine meet the failure.

The promise (docs/reliability.md): during the outage nothing is acked past the rows not written (the
sink's committed offsets on the evaluations topic stay below the first interaction sent during the
outage) and nothing is dead-lettered as if the rows were bad; after it, every interaction is stored
exactly once and counted once in the windows.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from groundwatch.local.stack import LocalStack
from streams.topics import bootstrap_servers
from tests.fault.sample_traffic import interactions
from tests.system_parts import missing_part

ENV = {
    "GROUNDWATCH_JUDGE__KIND": "lexical",
    "GROUNDWATCH_CLICKHOUSE__BATCH_SECONDS": "0.5",
    "GROUNDWATCH_CLICKHOUSE__SINK_MAX_FAILURES": "2",  # the batch is split (bad-row search) early
    "GROUNDWATCH_WINDOW__TICK_SECONDS": "0.5",
}


def table_dirs(chdb: Path) -> list[Path]:
    return sorted(p for p in chdb.glob("store/*/*") if p.is_dir())


def chattr(flag: str, paths: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, text=True)


@contextmanager
def cannot_write(chdb: Path) -> Iterator[list[Path]]:
    """Every table directory immutable for the block (then writable again, whatever happens)."""
    dirs = table_dirs(chdb)
    assert dirs, f"no table directories under {chdb}"
    frozen = chattr("+i", dirs)
    try:
        if frozen.returncode != 0:
            pytest.skip(f"chattr +i is not possible here ({frozen.stderr.strip()}): needs root on ext4/xfs")
        yield dirs
    finally:
        chattr("-i", dirs)


def require_chattr() -> None:
    if shutil.which("chattr") is None or os.geteuid() != 0:
        missing_part("the ClickHouse outage needs chattr (e2fsprogs) and root")


async def topic_offsets(broker: str, topic: str, idle_s: float = 2.0) -> list[tuple[int, int, str]]:
    """(partition, offset, key) of every message on the topic."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap_servers(broker), auto_offset_reset="earliest",
        enable_auto_commit=False, group_id=None,
    )  # fmt: skip
    await consumer.start()
    out: list[tuple[int, int, str]] = []
    try:
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            for tp, msgs in (await consumer.getmany(timeout_ms=300)).items():
                out += [(tp.partition, m.offset, (m.key or b"").decode()) for m in msgs]
                last = time.monotonic() if msgs else last
    finally:
        await consumer.stop()
    return out


async def committed(broker: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets on the topic (0 when none)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers(broker), group_id=group,
                                enable_auto_commit=False)  # fmt: skip
    await consumer.start()
    try:
        return {p: (await consumer.committed(TopicPartition(topic, p))) or 0 for p in range(partitions)}
    finally:
        await consumer.stop()


def wait_until(predicate: object, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def is_during(key: str) -> bool:
    """An interaction of the batch sent during the outage (ids ``<id>-b<n>``)."""
    return key.rsplit("-", 1)[-1].startswith("b")


def batch_splits(log: Path) -> int:
    """How often the sink split a failing batch to look for a row ClickHouse rejects."""
    lines = log.read_text().splitlines()
    return sum("failed flushes in a row; splitting the batch" in line for line in lines)


def test_an_outage_acks_nothing_unwritten_dead_letters_nothing_and_every_interaction_lands_once(
    tmp_path: Path,
) -> None:
    require_chattr()
    before, during = interactions(40, "a"), interactions(40, "b")
    with LocalStack(tmp_path, ENV, partitions=2, window_seconds=3600) as stack:
        assert stack.worker is not None
        broker, topic = stack.broker.url, f"{stack.prefix}evaluations"
        group = stack.settings().kafka.consumer_group
        stack.replay(before)
        stack.wait_for_evaluations(len(before), timeout_s=120)
        with cannot_write(tmp_path / "chdb"):
            stack.replay(during)
            # the stages upstream go on: every interaction's Evaluation reaches the evaluations topic
            keys: dict[str, tuple[int, int]] = {}

            def all_evaluated() -> bool:
                for part, offset, key in asyncio.run(topic_offsets(broker, topic)):
                    keys.setdefault(key, (part, offset))
                return len(keys) >= len(before) + len(during)

            wait_until(all_evaluated, "the Evaluations of both batches on the evaluations topic")
            first_unwritten = {
                p: min((off for k, (part, off) in keys.items() if part == p and is_during(k)), default=None)
                for p in range(stack.partitions)
            }

            def nothing_unwritten_acked() -> bool:
                offsets = asyncio.run(committed(broker, group, topic, stack.partitions))
                for p, bound in first_unwritten.items():
                    assert bound is None or offsets[p] <= bound, (offsets, first_unwritten)
                return True

            # the sink fails, retries and splits its batch looking for a bad row; faust commits every
            # second meanwhile: checked at each look until the sink split its batch three times
            wait_until(
                lambda: nothing_unwritten_acked() and batch_splits(stack.worker_log) >= 3,
                "three batch splits of the failing sink",
            )
            status = stack.worker.status()
            assert status is not None and status.counts["evaluations"] == len(before)
            assert status.counts["dead_letters"] == 0
        # writable again: the held rows go in, nothing was lost or dead-lettered
        stack.wait_for_evaluations(len(before) + len(during), timeout_s=180)
        report = stack.finish()
    assert report.counts["evaluations"] == len(before) + len(during)
    assert sum(w.count for w in report.windows) == len(before) + len(during)
    assert report.counts["dead_letters"] == 0
