"""Two worker processes in one consumer group, one ClickHouse, a real Alertmanager: a hallucination drift
fires one alert and its recovery resolves it, each transition notified once per receiver.

The workers share ClickHouse the way production workers share a server: over ClickHouse's HTTP
interface (clickhouse-connect's HTTP client), served here from one embedded chDB engine
(``tests.chdb_http_server``), because no ClickHouse server can be installed where the tests run. The
broker is a real Tansu. Both workers hold partitions of the same traffic and write its rows, but one
owns the series' windows (the partition of the touches topic its app and model key to) and only it
closes them and runs the rules. A webhook receiver in the test counts what reaches it, which
Alertmanager (it merges posts with equal labels) cannot show.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundwatch.local.supervise import WorkerProcess, spawn_worker, wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from pipeline.net import free_port
from tests.chdb_http_server import ChdbHttpServer
from tests.fixtures.receivers import WebhookReceiver
from tests.fixtures.wall_clock import recent
from tests.integration.helpers import deployment, jsonl
from tests.integration.traffic import CONTEXT, GROUNDED, HALLUCINATED

HOUR = timedelta(hours=1)
PER_WINDOW = 60
#: hallucinated answers per window: a 5 % baseline, a drift to 50 %, back to 5 %
BAD_PER_WINDOW = [3] * 6 + [30] * 3 + [3] * 4
RULES = """
rules:
  - name: hallucination-drift
    kind: baseline
    metric: hallucination_rate
    windows: 1
    baseline_windows: 4
    min_interactions: 20
    min_baseline_interactions: 60
    confidence: 0.999
    min_effect: 0.1
    for: 1
    resolve_for: 2
    cooldown_seconds: 0
    severity: critical
receivers:
  - name: am
    kind: alertmanager
    url: {alertmanager}
    retries: 3
    backoff_s: 0.1
  - name: counter
    kind: webhook
    url: {hook}
    secret: test-secret
    retries: 3
    backoff_s: 0.1
"""


@pytest.fixture()
def hook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    receiver.codes.clear()  # every post answered 200: the bodies are the notifications, once each
    yield receiver
    receiver.close()


def traffic(start: datetime) -> list[dict[str, Any]]:
    """One app/model's interactions, window by window, in event-time order."""
    out: list[dict[str, Any]] = []
    for w, bad in enumerate(BAD_PER_WINDOW):
        for i in range(PER_WINDOW):
            question, answer = (HALLUCINATED if i < bad else GROUNDED)[i % 3]
            stamp = start + w * HOUR + (i + 0.5) * HOUR / PER_WINDOW
            out.append({
                "interaction_id": f"w{w}-{i}", "app": "wiki-qa", "model": "beta", "question": question,
                "contexts": [CONTEXT], "answer": answer, "timestamp": stamp.isoformat(),
            })  # fmt: skip
    out.sort(key=lambda r: str(r["timestamp"]))
    return out


def active(alertmanager: str) -> list[dict[str, Any]]:
    """groundwatch's alerts that Alertmanager holds as active (a resolved one is not listed, or listed
    with its endsAt in the past)."""
    body = httpx.get(alertmanager + "/api/v2/alerts", params={"filter": ['app="wiki-qa"']}, timeout=5)
    now = datetime.now(UTC)
    return [
        a for a in body.json()
        if a["labels"].get("source") == "groundwatch" and a["status"]["state"] == "active"
        and datetime.fromisoformat(a["endsAt"].replace("Z", "+00:00")) > now
    ]  # fmt: skip


def test_two_workers_notify_each_transition_once(
    alertmanager: str, hook: WebhookReceiver, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(alertmanager=alertmanager, hook=hook.url), encoding="utf-8")
    # event time: hours in the past, so the resolution's endsAt is in the past for Alertmanager too
    start = recent(hours=20, start_of="hour")
    records = traffic(start)
    with TansuBroker(log_path=tmp_path / "tansu.log") as broker, ChdbHttpServer(tmp_path / "chdb") as ch:
        dep = deployment(broker.url, tmp_path, extra_env={
            "GROUNDWATCH_CLICKHOUSE__URL": ch + "/groundwatch",
            "GROUNDWATCH_KAFKA__PARTITIONS": "4",
            "GROUNDWATCH_ALERTS__RULES_FILE": str(rules),
            "GROUNDWATCH_WINDOW__SIZE_SECONDS": "3600",
            # a window closes once traffic is half an hour (event time) into the next one, so both
            # workers have written its rows; the last ones close when the traffic stops
            "GROUNDWATCH_WINDOW__GRACE_SECONDS": "1800",
            "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "3",
        })  # fmt: skip
        workers: list[WorkerProcess] = []
        try:
            for name in ("worker-a", "worker-b"):
                env = dep.env() | {"GROUNDWATCH_CLICKHOUSE__STATUS_FILE": str(tmp_path / f"{name}.json")}
                env["GROUNDWATCH_KAFKA__WEB_PORT"] = str(free_port(0))
                workers.append(spawn_worker(env, tmp_path / f"{name}.log", tmp_path / f"{name}.json"))
            for w in workers:
                w.wait_ready(120)
            drifted = [r for r in records if r["timestamp"] < (start + 9 * HOUR).isoformat()]
            recovered = records[len(drifted) :]
            assert asyncio.run(replay(dep.settings(), jsonl(drifted), rate=150)).sent == len(drifted)
            wait_for(lambda: len(hook.bodies) >= 1, 180, "the firing posted")
            wait_for(lambda: len(active(alertmanager)) == 1, 30, "the alert active in Alertmanager")
            assert asyncio.run(replay(dep.settings(), jsonl(recovered), rate=150)).sent == len(recovered)
            # each worker's status file counts the store as of its last write: the latest of the two
            wait_for(lambda: max(w.evaluations() for w in workers) >= len(records), 180,
                     "every interaction stored")  # fmt: skip
            wait_for(lambda: len(hook.bodies) >= 2, 120, "the resolution posted")
            wait_for(lambda: not active(alertmanager), 30, "no alert active in Alertmanager")
        finally:
            codes = [w.stop() for w in workers]
        logs = [w.log.read_text(encoding="utf-8", errors="replace") for w in workers]
        assert codes == [0, 0], [w.tail() for w in workers]
        # both workers took part: the group split the interactions topic's partitions between them
        for log in logs:
            assigned = [line for line in log.splitlines() if "Setting newly assigned partitions" in line]
            assert assigned and f"'{dep.prefix}interactions'" in assigned[-1], assigned
        ledger = ledger_rows(ch)
    states = [b["alert"]["state"] for b in hook.bodies]
    assert states == ["firing", "resolved"], hook.bodies  # once each, though two workers ran the rules
    firing = hook.bodies[0]["alert"]
    assert (firing["app"], firing["model"], firing["rule"]) == ("wiki-qa", "beta", "hallucination-drift")
    # a drifted window: the first one, unless the worker that opened the incident closed it before the
    # other had written its rows (then the drift breached first, in its view, one window later)
    assert start + 6 * HOUR <= datetime.fromisoformat(firing["window_start"]) <= start + 8 * HOUR
    outcomes = sorted((r["receiver"], r["status"]) for r in ledger if r["status"] != "claimed")
    assert outcomes == [("am", "delivered"), ("am", "delivered"), ("counter", "delivered"),
                        ("counter", "delivered")]  # fmt: skip
    # one worker owns the series: it alone made the transitions (no claim was lost to the other)
    made = [log for log in logs if "FIRING hallucination-drift" in log]
    assert len(made) == 1, "the series' owner alone evaluates its rules"
    assert "delivery hallucination-drift|wiki-qa|beta|" not in "\n".join(logs)


def ledger_rows(clickhouse_url: str) -> list[dict[str, Any]]:
    """The delivery ledger, read over the same HTTP interface the workers used."""
    sql = "SELECT * FROM groundwatch.alert_deliveries FINAL FORMAT JSONEachRow"
    body = httpx.post(clickhouse_url, content=sql.encode(), timeout=30)
    body.raise_for_status()
    return [json.loads(line) for line in body.text.splitlines() if line.strip()]
