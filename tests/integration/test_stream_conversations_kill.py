"""The turns of 200 conversations arrive out of order and some twice, and the worker is killed (SIGKILL)
mid-stream: after a restart every conversation has one row with its exact turn count."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

import pytest

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from tests.fixtures.wall_clock import recent
from tests.integration.helpers import deployment, jsonl
from tests.integration.traffic import CONTEXT, GROUNDED

CONVERSATIONS = 200

#: the conversations table read in a child process (an embedded chDB is opened by one process at a time)
READ_ROWS = """
import json
import os
from schemas.settings import settings_from_env
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(settings_from_env(os.environ).clickhouse)
rows = store.query_sync(f"SELECT conversation_id, turns FROM {store.db}.conversations FINAL")
print(json.dumps([[r["conversation_id"], r["turns"]] for r in rows]))
store.close()
"""


def turns(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, int]]:
    base = recent(hours=1)  # the workers close conversations and check event times on the wall clock
    records, want = [], {}
    for i in range(CONVERSATIONS):
        cid = f"conv-{i}"
        want[cid] = rng.randint(1, 3)
        for k in range(want[cid]):
            question, answer = GROUNDED[(i + k) % len(GROUNDED)]
            records.append({
                "interaction_id": f"{cid}-t{k}", "conversation_id": cid, "app": "app-c", "model": "m1",
                "timestamp": (base + timedelta(seconds=2 * i + k)).isoformat(),
                "question": question, "contexts": [CONTEXT], "answer": answer,
            })  # fmt: skip
    return records, want


def test_conversations_across_a_kill_are_rolled_up_once_with_every_turn(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    rng = random.Random(34)
    records, want = turns(rng)
    stream = records + rng.sample(records, len(records) // 6)  # some sent twice
    rng.shuffle(stream)  # out of order
    dep = deployment(
        broker.url,
        tmp_path_factory.mktemp("conversations"),
        extra_env={"GROUNDWATCH_CONVERSATIONS__IDLE_SECONDS": "3"},
    )
    first = dep.start_worker("worker1")
    first.wait_ready()
    result: dict[str, Any] = {}

    def produce() -> None:
        result["replay"] = asyncio.run(replay(dep.settings(), jsonl(stream), rate=60))

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_for(lambda: dep.evaluations() >= 60, 90, "the first evaluations")
    finally:
        first.kill()
    before = dep.evaluations()
    producer.join(timeout=120)
    assert result["replay"].sent == len(stream)
    assert 0 < before < len(records), "the kill must land mid-stream"

    def conversations() -> int:
        status = dep.status()
        return status.counts.get("conversations", 0) if status else 0

    second = dep.start_worker("worker2")
    try:
        second.wait_ready()
        wait_for(lambda: dep.evaluations() >= len(records), 180, "every turn after the restart")
        wait_for(lambda: conversations() >= CONVERSATIONS, 60, "every conversation rolled up")
    finally:
        assert second.stop() == 0, second.tail()

    out = subprocess.run(
        [sys.executable, "-c", READ_ROWS], env=dep.env(), cwd=dep.workdir, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = sorted((cid, turns) for cid, turns in json.loads(out.stdout))
    assert rows == sorted(want.items()), "one row per conversation, with its exact turn count"
