"""Prometheus scrapes a worker during a replay; its counters agree with what ClickHouse stored."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from pipeline.net import free_port

ROOT = Path(__file__).resolve().parents[2]
GOOD = 40
BAD = [
    b"not json at all",
    b'{"id": "bad-1", "question": "Q?", "answer": 5}',
    b'{"id": "bad-2", "answer": "A."}',
]


def lines() -> list[str]:
    sample = (ROOT / "groundwatch" / "data" / "sample_interactions.jsonl").read_text().splitlines()
    good = [line for line in sample if line.strip()][:GOOD]
    return good + [b.decode() for b in BAD]


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_prometheus_counters_agree_with_clickhouse(tmp_path: Path, prometheus_factory: Any) -> None:
    web = free_port(0)
    env = {
        "GROUNDWATCH_JUDGE__KIND": "lexical",
        "GROUNDWATCH_KAFKA__WEB_ENABLED": "true",
        "GROUNDWATCH_KAFKA__WEB_PORT": str(web),
    }
    with LocalStack(tmp_path / "stack", env=env) as stack:
        prometheus = prometheus_factory(free_port(0), f"127.0.0.1:{web}")
        assert get(f"http://127.0.0.1:{web}/healthz")[0] == 200
        status, ready = get(f"http://127.0.0.1:{web}/readyz")
        assert status == 200 and ready["ready"] and ready["checks"]["clickhouse"], ready
        stack.replay(lines())
        stack.wait_for_evaluations(GOOD, timeout_s=300)
        rows = prometheus.wait_for("sum(groundwatch_sink_rows_total)", GOOD)
        dead = prometheus.wait_for("sum(groundwatch_dead_letters_total)", len(BAD))
        validate = prometheus.query('sum(groundwatch_dead_letters_total{stage="validate"})')
        taken = prometheus.query('sum(groundwatch_events_in_total{stage="evaluate"})')  # the fused processor
        lag = prometheus.query("count(groundwatch_consumer_lag)")
        assert stack.worker is not None
        counts: dict[str, int] = {}

        def stored() -> bool:  # the status file follows ClickHouse after each flush and window
            status = stack.worker.status() if stack.worker else None
            counts.update(status.counts if status else {})
            return counts.get("dead_letters") == len(BAD) and counts.get("evaluations") == GOOD

        wait_for(stored, 60, "the dead letters' rows in ClickHouse")
    assert rows == GOOD == counts["evaluations"]
    assert dead == len(BAD) and validate == len(BAD)
    assert counts.get("dead_letters") == len(BAD)  # every dead letter is also a row
    assert taken == GOOD + len(BAD)
    assert lag is not None and lag >= 1  # one series per assigned partition


def test_the_shipped_scrape_config_is_valid(tmp_path: Path) -> None:
    import shutil
    import subprocess

    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    token = tmp_path / "token"
    token.write_text("t")
    config = (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    checked = tmp_path / "prometheus.yml"
    checked.write_text(config.replace("/etc/prometheus/groundwatch-token", str(token)))
    out = subprocess.run(
        [promtool, "check", "config", str(checked)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
