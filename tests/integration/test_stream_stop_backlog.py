"""A stop with a backlog of windows (Tansu + chDB, lexical judge, alert rules on every window): SIGTERM as
soon as every interaction is stored; the worker exits 0 within kafka.shutdown_timeout_s, closes each
window at most once (the sink's timer round and the stop's final round never overlap), leaves what its
budget cannot close, logged, and the next start recomputes exactly those: in the end every window is in
``window_aggregates`` once, and every alert transition is in ``alerts`` and on the alerts topic once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from tests.fixtures.wall_clock import recent
from tests.integration import backlog
from tests.integration.helpers import REPO, deployment, jsonl, topic_of

WINDOW_S = 2
PER_APP = 1200  # windows per app, one interaction each: 2,400 windows
DUE_BEFORE_STOP = 200  # per app: the first ones are due by the watermark while the stream runs
SHUTDOWN_TIMEOUT_S = 30.0


def query_stopped(env: dict[str, str], sql: str) -> list[list[Any]]:
    """Rows of ``sql`` on a stopped worker's embedded chDB, read in a child process (one engine path
    per process)."""
    url = env["GROUNDWATCH_CLICKHOUSE__URL"].removeprefix("chdb://")
    code = (
        "import json, sys, clickhouse_connect\n"
        f"c = clickhouse_connect.get_client(dsn='chdb://{url}')\n"
        "print(json.dumps([list(r) for r in c.query(sys.argv[1]).result_rows], default=str))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, sql], capture_output=True, text=True, timeout=120,
                         cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows: list[list[Any]] = json.loads(out.stdout)
    return rows


def test_a_stop_with_a_window_backlog_ends_in_time_and_closes_each_window_once(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workdir = tmp_path_factory.mktemp("stop-backlog")
    # the first DUE_BEFORE_STOP windows of each app close while the stream runs (the timer's rounds), the
    # rest wait for the stop
    env = {
        **backlog.settings(workdir / "rules.yaml", PER_APP, WINDOW_S, DUE_BEFORE_STOP),
        "GROUNDWATCH_KAFKA__SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_TIMEOUT_S),
    }
    dep = deployment(broker.url, workdir, extra_env=env)
    start = recent(seconds=WINDOW_S * PER_APP + 60)  # the worker checks event times on its wall clock
    recs = backlog.records(start, PER_APP, WINDOW_S)
    expected_windows = 2 * PER_APP

    first = dep.start_worker("worker1")
    try:
        first.wait_ready()
        sent = asyncio.run(replay(dep.settings(), jsonl(recs)))
        assert sent.sent == len(recs)
        wait_for(lambda: dep.evaluations() >= len(recs), 300, "every interaction stored")
    except BaseException:
        first.kill()
        raise
    began = time.monotonic()
    code = first.stop(timeout=SHUTDOWN_TIMEOUT_S + 30)
    stop_s = time.monotonic() - began
    log1 = first.log.read_text(errors="replace")
    assert code == 0, first.tail()
    assert stop_s < SHUTDOWN_TIMEOUT_S, f"the stop took {stop_s:.1f} s"
    assert "ShutdownTimeout" not in log1 and "Traceback" not in log1, first.tail()
    closed1 = backlog.closed_keys(log1)
    assert closed1 and max(closed1.values()) == 1, [k for k, n in closed1.items() if n > 1][:5]
    summary = backlog.on_stop(log1)
    assert summary is not None, first.tail()
    on_stop, left = summary
    assert on_stop + left >= expected_windows - 2 * DUE_BEFORE_STOP  # the backlog: at least 2,000
    assert len(closed1) + left == expected_windows  # each window closed once, or left

    # the next start recomputes exactly the windows left (none, when the stop's budget closed them all)
    second = dep.start_worker("worker2")
    try:
        second.wait_ready()

        def all_written() -> bool:
            status = second.status()
            return status is not None and status.counts.get("window_aggregates", 0) >= expected_windows

        wait_for(all_written, 300, "the windows left to be recomputed")
    finally:
        assert second.stop(timeout=SHUTDOWN_TIMEOUT_S + 30) == 0, second.tail()
    closed2 = backlog.closed_keys(second.log.read_text(errors="replace"))
    assert set(closed2.values()) <= {1} and not set(closed2) & set(closed1)
    assert len(closed2) == left

    env_now = dep.env()
    windows = query_stopped(
        env_now, "SELECT app, model, window_start, count() FROM groundwatch.window_aggregates "
        "GROUP BY app, model, window_start"
    )  # fmt: skip
    assert len(windows) == expected_windows and {n for *_, n in windows} == {1}  # written once each
    alert_rows = query_stopped(env_now, "SELECT alert_id, count() FROM groundwatch.alerts GROUP BY alert_id")
    assert alert_rows and {n for _, n in alert_rows} == {1}
    on_topic = Counter(a["alert_id"] for a in topic_of(dep, "alerts", idle_s=2))
    assert set(on_topic) == {a for a, _ in alert_rows} and set(on_topic.values()) == {1}
    # each run of hallucinating "flapping" windows fires once and resolves once (the last may stay open)
    assert PER_APP // backlog.FLAP - 1 <= len(alert_rows) <= PER_APP // backlog.FLAP


def test_the_log_pattern_matches_the_closer_line() -> None:
    """The pattern the test above reads the log with matches what the closer writes."""
    line = "window 2026-01-01T00:00:00+00:00 steady/m1 closed: 1 interactions, hallucination rate 0.0"
    assert backlog.closed_keys(line) == Counter({("2026-01-01T00:00:00+00:00", "steady", "m1"): 1})


def test_the_summary_pattern_matches_the_closer_line() -> None:
    """The stop's summary line, as the closer writes it with and without windows left."""
    assert backlog.on_stop("windows on stop: 12 closed in 3.2 s, none left, 0 failed") == (12, 0)
    line = "windows on stop: 12 closed in 3.2 s, 7 LEFT for the next start to recompute, 0 failed (...)"
    assert backlog.on_stop(line) == (12, 7)
    assert backlog.on_stop("window 2026-01-01T00:00:00+00:00 steady/m1 closed: 1 interactions") is None


def test_records_make_one_window_each() -> None:
    recs = backlog.records(datetime(2026, 1, 1, tzinfo=UTC), PER_APP, WINDOW_S)
    assert len({(r["app"], r["timestamp"][:19]) for r in recs}) == 2 * PER_APP
