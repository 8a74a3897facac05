"""The broker restarted with empty storage in the middle of a stream, and a stop while the broker is gone,
on the real Tansu broker and chDB.

The promise (docs/reliability.md): a worker whose broker lost the topics ends with one line
(``groundwatch worker: BrokerUnavailable: ...``) and exit code 2 instead of retrying commits for ever;
started again (as a supervisor would), it recreates the topics, and an at-least-once producer sending
everything again leaves every interaction in ClickHouse exactly once (ReplacingMergeTree, FINAL reads)
and counted once in the windows. A SIGTERM always ends the worker within ``kafka.shutdown_timeout_s``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import spawn_worker
from tests.fixtures.wall_clock import recent

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"
SHUTDOWN_TIMEOUT_S = 15
ENV = {
    "GROUNDWATCH_JUDGE__KIND": "lexical",
    "GROUNDWATCH_CLICKHOUSE__BATCH_SECONDS": "0.5",
    "GROUNDWATCH_WINDOW__TICK_SECONDS": "0.5",
    "GROUNDWATCH_KAFKA__TOPIC_CHECK_SECONDS": "1",
    "GROUNDWATCH_KAFKA__SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_TIMEOUT_S),
}
# a stop that has not ended this long after SIGTERM is a hang (the promise is SHUTDOWN_TIMEOUT_S)
HANG_S = SHUTDOWN_TIMEOUT_S + 45


def interactions(n: int, tag: str) -> list[str]:
    """``n`` sample interactions with ids of their own (``<id>-<tag>``), each with its event time as its
    producer made it: sending one again sends the same time (one sent again with another time is
    another event: the time is in the tables' key)."""
    base = [json.loads(x) for x in SAMPLE.read_text().splitlines() if x.strip()]
    made = recent()  # the worker checks event times on its wall clock
    out = []
    for i in range(n):
        record = dict(base[i % len(base)])
        record["id"] = f"{record.get('id') or record.get('interaction_id')}-{tag}{i}"
        record.pop("interaction_id", None)
        record["timestamp"] = (made + timedelta(milliseconds=i)).isoformat()
        out.append(json.dumps(record))
    return out


def our_lines(log: Path) -> list[str]:
    return [x for x in log.read_text(errors="replace").splitlines() if x.startswith("groundwatch worker:")]


def test_a_broker_restarted_empty_mid_stream_ends_the_worker_and_a_restart_counts_each_interaction_once(
    tmp_path: Path,
) -> None:
    first, second = interactions(300, "a"), interactions(60, "b")
    with LocalStack(tmp_path, ENV, partitions=2, window_seconds=3600) as stack:
        assert stack.worker is not None
        sender = threading.Thread(target=stack.replay, args=(first,), kwargs={"rate": 100.0})
        sender.start()
        stack.wait_for_evaluations(1, timeout_s=120)  # mid-stream: the worker is evaluating
        stack.broker.stop()  # Tansu keeps topics in memory: it comes back empty on the same port
        stack.broker.start()
        sender.join()
        code = stack.worker.proc.wait(timeout=120)  # ends by itself: no signal sent
        lines = our_lines(stack.worker_log)
        assert code == 2, stack.worker.tail()
        assert len(lines) == 1 and lines[0].startswith(
            f"groundwatch worker: BrokerUnavailable: the broker {stack.broker.url} lost groundwatch's "
            f"topics {stack.prefix}alerts, "
        ), lines
        assert "(restarted with empty storage?)" in lines[0]
        # the supervisor starts it again: it recreates the topics; the producer sends everything again
        stack.worker = spawn_worker(stack.env(), stack.worker_log, stack.status_file, cwd=tmp_path)
        stack.worker.wait_ready(120)
        stack.replay([*first, *second])
        stack.wait_for_evaluations(len(first) + len(second), timeout_s=300)
        report = stack.finish()
    assert report.counts["evaluations"] == len(first) + len(second)
    assert sum(w.count for w in report.windows) == len(first) + len(second)
    assert report.counts["dead_letters"] == 0


def test_sigterm_ends_the_worker_within_its_shutdown_timeout_while_the_broker_is_gone(tmp_path: Path) -> None:
    lines = interactions(40, "c")
    with LocalStack(tmp_path, ENV, partitions=2, window_seconds=3600) as stack:
        assert stack.worker is not None
        stack.replay(lines, rate=50.0)
        stack.wait_for_evaluations(5, timeout_s=120)
        stack.broker.stop()  # gone, not back: commits and sends have nowhere to go
        stack.worker.proc.send_signal(signal.SIGTERM)
        try:
            code = stack.worker.proc.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            stack.worker.kill()
            raise AssertionError(f"SIGTERM did not end the worker:\n{stack.worker.tail()}") from None
        ours = our_lines(stack.worker_log)
        # a clean stop (0), or the deadline's one line and 2: never a hang
        assert (code, ours) == (0, []) or (code == 2 and len(ours) == 1), (code, ours)
        if code == 2:
            assert ours[0].startswith(
                f"groundwatch worker: ShutdownTimeout: the worker did not stop within "
                f"kafka.shutdown_timeout_s={SHUTDOWN_TIMEOUT_S}s"
            )
