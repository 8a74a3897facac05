"""Ownership: 1, 2 and 3 workers in one consumer group on the same traffic, this tree against a baseline.

    python benchmarks/ownership.py --baseline DIR [--workers 1 2 3] [--per-window 25] \
        [--conversations 100] [--traces 100] [--json build/bench/ownership.json]

Each run: a real Tansu broker, one ClickHouse shared by the workers over its HTTP interface (one chDB
engine served by ``tests.chdb_http_server``), the scripted OpenAI-compatible judge in this process (no
latency: the run is CPU-bound), ``conversations.judge`` llm. The traffic (``tests/integration/
test_stream_three_workers.py``'s, scaled): six apps over twelve one-hour windows of event time, one of them
drifting; conversations of two turns, the second a re-ask (one judge call a conversation); agent traces
sent to the workers' OTLP/HTTP receivers in requests that each mix pieces of two traces. The backlog is
produced once the workers are ready; the run ends when every interaction, conversation and window is
stored and no worker closed a window for 8 s.

Figures per run: the workers' CPU seconds (from /proc, ready to done) per interaction, interactions a
second end to end, window closes per window (the workers' log lines), conversation-judge calls per
conversation (the judge's re-ask requests naming it), traces that became one complete interaction. Then,
this tree only: 3 workers, one killed (SIGKILL) a third of the way; seconds from the kill until a
surviving worker owns its partitions (its log's ``owner of ... gained``).

``--baseline`` is a checkout of the starting commit (``git worktree add ../base <commit>``); its workers
run from there (PYTHONPATH), in the same conditions. On 2 cores, 2 and 3 workers share them with the
broker, the ClickHouse server and the judge: CPU per interaction is the comparable figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, cpu_seconds, write_json  # noqa: E402
from groundwatch.local.supervise import wait_for  # noqa: E402
from groundwatch.local.tansu import TansuBroker  # noqa: E402
from groundwatch.replay import replay  # noqa: E402
from tests.chdb_http_server import ChdbHttpServer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.integration import test_stream_three_workers as scenario  # noqa: E402
from tests.integration.helpers import deployment, fake_judge, jsonl  # noqa: E402

OUT = REPO / "build" / "bench" / "ownership"
GAINED = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d+)\].*owner of \S+ partitions .*gained \[\d")


def traffic(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    scenario.PER_WINDOW = args.per_window
    scenario.CONVERSATIONS = args.conversations
    scenario.TRACES = args.traces
    start = (
        scenario.datetime.now(scenario.UTC).replace(minute=0, second=0, microsecond=0) - 20 * scenario.HOUR
    )
    records = scenario.plain(start) + scenario.conversation_turns(start)
    records.sort(key=lambda r: str(r["timestamp"]))
    return records, scenario.trace_requests(start, random.Random(41))


def env_for(broker: str, clickhouse: str, judge: str, workdir: Path, tree: Path) -> Any:
    rules = workdir / "rules.yaml"
    rules.write_text(scenario.RULES.format(hook="http://127.0.0.1:9/none"), encoding="utf-8")
    dep = deployment(broker, workdir, extra_env={
        **fake_judge(judge),
        "PYTHONPATH": str(tree),
        "GROUNDWATCH_CLICKHOUSE__URL": clickhouse,
        "GROUNDWATCH_KAFKA__PARTITIONS": "6",
        "GROUNDWATCH_KAFKA__OTLP_INPUT": "true",
        "GROUNDWATCH_KAFKA__WEB_ENABLED": "true",
        "GROUNDWATCH_ALERTS__RULES_FILE": str(rules),
        "GROUNDWATCH_WINDOW__SIZE_SECONDS": "3600",
        "GROUNDWATCH_WINDOW__GRACE_SECONDS": "1800",
        "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "5",
        "GROUNDWATCH_CONVERSATIONS__JUDGE": "llm",
        "GROUNDWATCH_CONVERSATIONS__IDLE_SECONDS": "1800",
        "GROUNDWATCH_CONVERSATIONS__QUIET_SECONDS": "5",
    })  # fmt: skip
    return dep


def closes(logs: dict[str, str]) -> dict[tuple[str, ...], list[str]]:
    out: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for name, text in logs.items():
        for m in scenario.CLOSED.finditer(text):
            out[m.groups()].append(name)
    return out


def run(
    args: argparse.Namespace, broker: TansuBroker, tree: Path, workers: int, kill: bool = False
) -> dict[str, Any]:
    records, traces = traffic(args)
    workdir = OUT / f"{tree.name}-{workers}{'-kill' if kill else ''}-{time.strftime('%H%M%S')}"
    workdir.mkdir(parents=True, exist_ok=True)
    with ChdbHttpServer(workdir / "chdb") as ch, FakeOpenAIServer() as judge:
        dep = env_for(broker.url, ch + "/groundwatch", judge.base_url, workdir, tree)
        group = scenario.Group(dep, workdir, tree)
        names = [f"w{i}" for i in range(workers)]
        for name in names:
            group.start(name)
        for w in group.workers.values():
            w.wait_ready(240)
        cpu0 = {n: cpu_seconds(w.pid) or 0.0 for n, w in group.workers.items()}
        expected = len(records) + args.traces
        began = time.monotonic()

        def stored() -> int:
            return scenario.count(ch, "SELECT count() FROM groundwatch.evaluations FINAL")

        killed_at, moved_s = None, None
        cut = len(records) // 3 if kill else len(records)
        assert asyncio.run(replay(dep.settings(), jsonl(records[:cut]), rate=None)).sent == cut
        scenario.post_traces(traces[: args.traces // 2], [group.ports[n] for n in names])
        if kill:
            wait_for(lambda: stored() >= cut // 2, 600, "a share stored")
            group.workers[names[-1]].kill()
            killed_at = time.time()
            asyncio.run(replay(dep.settings(), jsonl(records[cut:]), rate=None))
        alive = names[:-1] if kill else names
        scenario.post_traces(traces[args.traces // 2 :], [group.ports[n] for n in alive])
        wait_for(lambda: stored() >= expected, 900, "every interaction stored")
        wait_for(lambda: scenario.count(ch, "SELECT count() FROM groundwatch.conversations FINAL WHERE app = "
                 "'chat'") >= args.conversations, 600, "every conversation")  # fmt: skip
        wait_for(lambda: scenario.count(ch, "SELECT count() FROM groundwatch.window_aggregates FINAL")
                 >= len(scenario.APPS) * scenario.WINDOWS, 600, "every window")  # fmt: skip
        quiet_since, seen = time.monotonic(), -1
        while time.monotonic() - quiet_since < 8:  # no window closed for 8 s
            now = sum(len(v) for v in closes(group.logs()).values())
            if now != seen:
                seen, quiet_since = now, time.monotonic()
            time.sleep(1)
        seconds = time.monotonic() - began - 8
        cpu = sum((cpu_seconds(group.workers[n].pid) or 0.0) - cpu0[n] for n in alive)
        if killed_at is not None:
            for n in alive:
                for m in GAINED.finditer(group.logs()[n]):
                    # the workers log local time: this machine's zone
                    at = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
                    if at > killed_at and (moved_s is None or at - killed_at < moved_s):
                        moved_s = at - killed_at
        reasks = [b for b in judge.stats.bodies if "pairs of user messages" in json.dumps(b)]
        calls = Counter(c for b in reasks for c in set(re.findall(r"conv\d{3}", json.dumps(b))))
        traced = scenario.sql(
            ch, "SELECT sum(complete) AS c FROM groundwatch.evaluations FINAL WHERE app = 'support-bot'"
        )[0]
        for name in alive:
            group.workers[name].stop(timeout=90)
        by_window = closes(group.logs())
        plain = [k for k in by_window if k[1] in scenario.APPS]
    return {
        "tree": str(tree), "workers": workers, "killed": kill, "interactions": expected,
        "seconds": round(seconds, 1), "per_second": round(expected / seconds, 1),
        "cpu_ms_per_interaction": round(1000 * cpu / expected, 2),
        "closes_per_window": round(sum(len(by_window[k]) for k in plain) / max(1, len(plain)), 2),
        "windows_closed_by_two_or_more_workers": sum(1 for k in plain if len(set(by_window[k])) > 1),
        "judge_calls_per_conversation": round(sum(calls.values()) / max(1, args.conversations), 2),
        "traces_complete": f"{int(traced['c'])}/{args.traces}",
        "ownership_moved_s": None if moved_s is None else round(moved_s, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="a checkout of the starting commit")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--per-window", type=int, default=25)
    ap.add_argument("--conversations", type=int, default=100)
    ap.add_argument("--traces", type=int, default=100)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    base = args.baseline.resolve()
    commit = subprocess.run(["git", "-C", str(base), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    print(f"baseline {base} (commit {commit})", flush=True)
    out: list[dict[str, Any]] = []
    OUT.mkdir(parents=True, exist_ok=True)
    with TansuBroker(log_path=OUT / "tansu.log") as broker:
        for workers in args.workers:
            for tree in (base, REPO):
                figures = run(args, broker, tree, workers)
                print(json.dumps(figures), flush=True)
                out.append(figures)
        figures = run(args, broker, REPO, 3, kill=True)
        print(json.dumps(figures), flush=True)
        out.append(figures)
    machine.finish()
    print(machine.describe(), flush=True)
    write_json(args.json, {"machine": machine.__dict__, "runs": out, "baseline_commit": commit})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
