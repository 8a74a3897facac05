"""ClickHouse over HTTP stops answering for a while (its server process is gone, the port refuses
connections), on the real Tansu broker, with the worker reaching ClickHouse as in production: through
clickhouse-connect's HTTP client. The server is one chDB engine served over ClickHouse's HTTP interface
(``tests.chdb_http_server``; no ClickHouse server can be installed here), stopped and started again on
the same port and data.

The promise (docs/reliability.md): the worker keeps running, nothing is dead-lettered as if the rows
were bad, and once ClickHouse answers again every interaction is stored exactly once and counted once
in the windows.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from pipeline.net import free_port
from tests.chdb_http_server import ChdbHttpServer
from tests.fault.sample_traffic import interactions
from tests.integration.helpers import deployment, topic_of

ENV = {
    "GROUNDWATCH_CLICKHOUSE__SINK_MAX_FAILURES": "2",  # the batch is split (bad-row search) early
    "GROUNDWATCH_WINDOW__SIZE_SECONDS": "3600",
}


def scalar(url: str, sql: str) -> int:
    answer = httpx.post(url, content=sql.encode(), timeout=30)
    answer.raise_for_status()
    return int(answer.text.strip())


def test_clickhouse_gone_and_back_loses_nothing_and_dead_letters_nothing(tmp_path: Path) -> None:
    before, during = interactions(40, "a"), interactions(40, "b")
    total = len(before) + len(during)
    port = free_port(0)
    chdb = tmp_path / "chdb"
    server = ChdbHttpServer(chdb, port=port)
    with TansuBroker(log_path=tmp_path / "tansu.log") as broker:
        try:
            url = server.start()
            dep = deployment(broker.url, tmp_path, extra_env=ENV | {
                "GROUNDWATCH_CLICKHOUSE__URL": url + "/groundwatch"
            })  # fmt: skip
            worker = dep.start_worker()
            try:
                worker.wait_ready(120)
                asyncio.run(replay(dep.settings(), before))
                wait_for(lambda: worker.evaluations() >= len(before), 120, "the first batch stored")
                server.stop()  # ClickHouse is gone: connections are refused
                asyncio.run(replay(dep.settings(), during))
                # the stages before the sink go on: every interaction's Evaluation reaches its topic
                evaluated = topic_of(dep, "evaluations", expect=total)
                assert {e["interaction_id"] for e in evaluated} >= {json.loads(x)["id"] for x in during}
                wait_for(lambda: "timed flush failed" in worker.log.read_text(), 60, "the sink failing")
                assert worker.alive(), worker.tail()
                assert server.start() == url  # back, on the same port and data
                wait_for(lambda: worker.evaluations() >= total, 180, "every interaction stored after it")
            finally:
                code = worker.stop()
            assert code == 0, worker.tail()
            assert scalar(url, "SELECT count() FROM groundwatch.evaluations FINAL") == total
            windows = "SELECT sum(count) FROM groundwatch.window_aggregates FINAL"
            assert scalar(url, windows) == total  # counted once in the windows
            assert scalar(url, "SELECT count() FROM groundwatch.dead_letters") == 0
            assert topic_of(dep, "deadletter", idle_s=2.0) == []
        finally:
            server.stop()  # whatever happened (a no-op when stopped)
