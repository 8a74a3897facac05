"""Two figures of a real worker (Tansu + a ``groundwatch worker`` subprocess + embedded chDB, lexical judge):

    python -m benchmarks.worker_stop dead-letters [--tree DIR] [--count 5000]
    python -m benchmarks.worker_stop stop-backlog [--tree DIR] [--windows 2000]

``dead-letters``: ``--count`` dead letters put on the deadletter topic at once while the worker runs; dead-
letter rows recorded per second, from the first send until the worker's status file counts them all in
``dead_letters``. ``stop-backlog``: one interaction in each of ``--windows`` windows (two apps, 2 s windows,
an alert rule on every window), none of them due before the stop (a grace longer than the stream);
SIGTERM once all are stored: the stop's seconds and exit code, the windows closed after the signal (and
how many of them more than once), the windows the stop left for the next start.

``--tree`` runs the worker from another checkout (a baseline worktree) in the same run's conditions; the
benchmark's own code (producer, reader) is this one. Everything binds 127.0.0.1; work directories and
logs go under build/bench/worker_stop/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from benchmarks.machine import REPO, Machine, write_json
from groundwatch.local.supervise import WorkerProcess, spawn_worker, wait_for
from groundwatch.local.tansu import TansuBroker, free_port, worker_env
from groundwatch.replay import replay
from schemas.errors import JudgeError
from schemas.settings import settings_from_env
from streams.codec import dead_letter, encode
from streams.topics import bootstrap_servers
from tests.integration import backlog

OUT = REPO / "build" / "bench" / "worker_stop"


def environment(broker: str, workdir: Path, tree: Path, extra: dict[str, str]) -> dict[str, str]:
    import os

    prefix = f"b{uuid.uuid4().hex[:8]}."
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWATCH_")}
    env.update(worker_env(broker))
    env.update(
        {
            "GROUNDWATCH_KAFKA__TOPIC_PREFIX": prefix,
            "GROUNDWATCH_KAFKA__CONSUMER_GROUP": f"{prefix}group",
            "GROUNDWATCH_KAFKA__PARTITIONS": "2",
            "GROUNDWATCH_KAFKA__DATADIR": str(workdir / "faust"),
            "GROUNDWATCH_KAFKA__WEB_PORT": str(free_port()),
            "GROUNDWATCH_CLICKHOUSE__URL": f"chdb://{workdir / 'chdb'}",
            "GROUNDWATCH_CLICKHOUSE__STATUS_FILE": str(workdir / "status.json"),
            "GROUNDWATCH_JUDGE__KIND": "lexical",
            "PYTHONPATH": str(tree),
        }
    )
    env.update(extra)
    return env


def start(env: dict[str, str], workdir: Path, tree: Path) -> WorkerProcess:
    worker = spawn_worker(
        env, workdir / "worker.log", Path(env["GROUNDWATCH_CLICKHOUSE__STATUS_FILE"]), cwd=tree
    )
    worker.wait_ready(timeout=180)
    return worker


def stored(worker: WorkerProcess, table: str) -> int:
    status = worker.status()
    return status.counts.get(table, 0) if status else 0


async def send_letters(env: dict[str, str], n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(env["GROUNDWATCH_KAFKA__BROKER"]))
    await producer.start()
    topic = env["GROUNDWATCH_KAFKA__TOPIC_PREFIX"] + "deadletter"
    try:
        for i in range(n):
            letter = dead_letter(
                stage="otlp",
                error=JudgeError(f"span {i} has no model"),
                payload=f"span-{i}",
                source_topic="otlp",
                interaction_id=f"span-{i}",
                failed_at=datetime.now(UTC),
            )
            await producer.send(topic, encode(letter), key=f"span-{i}".encode())
        await producer.flush()
    finally:
        await producer.stop()


def dead_letters(args: argparse.Namespace, broker: TansuBroker) -> dict[str, Any]:
    workdir = OUT / f"dead-letters-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True)
    env = environment(broker.url, workdir, args.tree, {})
    worker = start(env, workdir, args.tree)
    try:
        began = time.monotonic()
        asyncio.run(send_letters(env, args.count))
        sent_s = time.monotonic() - began
        wait_for(
            lambda: stored(worker, "dead_letters") >= args.count,
            args.timeout,
            "every dead-letter row",
            interval=0.1,
        )
        seconds = time.monotonic() - began
    finally:
        code = worker.stop()
    return {
        "letters": args.count,
        "sent_s": round(sent_s, 2),
        "recorded_s": round(seconds, 2),
        "rows_per_s": round(args.count / seconds, 1),
        "exit": code,
        "log": str(worker.log),
    }


def stop_backlog(args: argparse.Namespace, broker: TansuBroker) -> dict[str, Any]:
    workdir = OUT / f"stop-backlog-{uuid.uuid4().hex[:6]}"
    workdir.mkdir(parents=True)
    per_app = args.windows // 2
    # none of the windows due before the stop
    env = environment(broker.url, workdir, args.tree, backlog.settings(workdir / "rules.yaml", per_app, 2, 0))
    first = (datetime.now(UTC) - timedelta(seconds=2 * per_app + 60)).replace(microsecond=0)
    lines = [json.dumps(record) for record in backlog.records(first, per_app, 2)]
    worker = start(env, workdir, args.tree)
    try:
        asyncio.run(replay(settings_from_env(env), lines))
        wait_for(
            lambda: stored(worker, "evaluations") >= len(lines), args.timeout, "every interaction stored"
        )
    except BaseException:
        worker.kill()
        raise
    before = len(worker.log.read_text(errors="replace"))
    began = time.monotonic()
    code = worker.stop(timeout=120)
    seconds = time.monotonic() - began
    after = worker.log.read_text(errors="replace")[before:]
    closed = backlog.closed_keys(after)
    _, left = backlog.on_stop(after) or (0, 0)
    return {
        "windows": 2 * per_app,
        "stop_s": round(seconds, 2),
        "exit": code,
        "closed_after_signal": len(closed),
        "closed_more_than_once": sum(1 for n in closed.values() if n > 1),
        "left_for_next_start": left,
        "timeout_line": "ShutdownTimeout" in after,
        "log": str(worker.log),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["dead-letters", "stop-backlog"])
    ap.add_argument("--tree", type=Path, default=REPO, help="the checkout the worker runs from")
    ap.add_argument("--count", type=int, default=5000, help="dead letters")
    ap.add_argument("--windows", type=int, default=2000, help="windows in the backlog")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.tree = args.tree.resolve()
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    tree_commit = subprocess.run(
        ["git", "-C", str(args.tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"worker from {args.tree} (commit {tree_commit})", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    with TansuBroker(log_path=OUT / "tansu.log") as broker:
        result = dead_letters(args, broker) if args.what == "dead-letters" else stop_backlog(args, broker)
    machine.finish()
    print(json.dumps(result, indent=2))
    print(machine.describe())
    write_json(args.json, {"result": result, "machine": machine.as_dict()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
