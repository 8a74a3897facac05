"""Kill the worker (SIGKILL) mid-stream, start it again: every interaction is counted exactly once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from tests.integration.helpers import deployment, jsonl, topic_of
from tests.integration.traffic import GROUNDED, HALLUCINATED, synthetic

N = 150


def test_kill_mid_stream_and_restart_counts_each_interaction_once(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dep = deployment(broker.url, tmp_path_factory.mktemp("kill"))
    records = synthetic("app-a", GROUNDED, N // 2) + synthetic("app-b", HALLUCINATED, N - N // 2)
    lines = jsonl(records)
    ids = {r["interaction_id"] for r in records}

    first = dep.start_worker("worker1")
    first.wait_ready()
    result: dict[str, Any] = {}

    def produce() -> None:  # ~5 s of traffic, so the kill lands mid-stream
        result["replay"] = asyncio.run(replay(dep.settings(), lines, rate=30))

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_for(lambda: dep.evaluations() >= 20, 60, "the first evaluations")
    finally:
        first.kill()
    before = dep.evaluations()
    producer.join(timeout=60)
    assert result["replay"].sent == N
    assert 0 < before < N, "the kill must land mid-stream"

    second = dep.start_worker("worker2")
    try:
        second.wait_ready()
        wait_for(lambda: dep.evaluations() >= N, 120, "all interactions after the restart")
    finally:
        assert second.stop() == 0, second.tail()

    report = dep.report()
    assert report.counts["evaluations"] == N
    assert sum(w.count for w in report.windows) == N, "windows count each interaction once"
    on_topic = {e["interaction_id"] for e in topic_of(dep, "evaluations", expect=N)}
    assert on_topic == ids  # at-least-once on the topic: redelivered ones may appear twice
