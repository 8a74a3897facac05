"""Three worker processes in one consumer group share one ClickHouse; one is killed (SIGKILL) mid-run and
started again. Each window, conversation and trace has one owner among them, so:

* every interaction is stored once, nothing is lost across the kill;
* each window is closed about once (not once per worker), each conversation rolled up once and judged
  once (the scripted judge counts its re-ask calls), each trace one complete interaction although its
  spans came in export requests that mix traces, sent to different workers;
* the drift of one app fires one alert;
* a worker told to stop (SIGTERM) while the group rebalances ends within its shutdown timeout.

The workers share ClickHouse over its HTTP interface, served from one embedded chDB engine
(``tests.chdb_http_server``: no ClickHouse server can be installed where the tests run), on a real Tansu.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import WorkerProcess, spawn_worker, wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from pipeline.net import free_port
from schemas.touch import touch_key
from streams.ownership import partition_of
from tests.chdb_http_server import ChdbHttpServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fixtures.receivers import WebhookReceiver
from tests.integration.helpers import deployment, fake_judge, jsonl
from tests.integration.traffic import CONTEXT, GROUNDED, HALLUCINATED

HOUR = timedelta(hours=1)
WINDOWS = 12
PER_WINDOW = 75  # interactions of each plain app per window
APPS = ["wiki-qa", "app-1", "app-2", "app-3", "app-4", "app-5"]  # wiki-qa drifts
#: wiki-qa's hallucinated answers per window: a 5 % baseline, a drift to 50 %, back to 5 %
BAD = [4] * 6 + [38] * 3 + [4] * 3
CONVERSATIONS = 300  # of two turns each: 6 x 12 x 75 + 600 = 6,000 interactions
TRACES = 200  # in 200 export requests, each holding pieces of two traces
SHUTDOWN_S = 20.0
PARTITIONS = 6
RULES = """
rules:
  - name: hallucination-drift
    kind: baseline
    metric: hallucination_rate
    app: wiki-qa
    windows: 1
    baseline_windows: 4
    min_interactions: 20
    min_baseline_interactions: 60
    confidence: 0.999
    min_effect: 0.1
    for: 1
    resolve_for: 2
    cooldown_seconds: 0
receivers:
  - name: counter
    kind: webhook
    url: {hook}
    retries: 3
    backoff_s: 0.1
"""
CLOSED = re.compile(r"window (\S+) (\S+)/(\S+) closed:")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "otlp_traces.jsonl"


def plain(start: datetime) -> list[dict[str, Any]]:
    out = []
    for app in APPS:
        for w in range(WINDOWS):
            bad = BAD[w] if app == "wiki-qa" else 4
            for i in range(PER_WINDOW):
                question, answer = (HALLUCINATED if i < bad else GROUNDED)[i % 3]
                out.append({
                    "interaction_id": f"{app}-w{w}-{i}", "app": app, "model": "beta", "question": question,
                    "contexts": [CONTEXT], "answer": answer,
                    "timestamp": (start + w * HOUR + (i + 0.5) * HOUR / PER_WINDOW).isoformat(),
                })  # fmt: skip
    return out


def conversation_turns(start: datetime) -> list[dict[str, Any]]:
    """Two turns each, a minute apart, the second a re-ask of the first (one judge call a conversation);
    each names its conversation, so the judge's calls can be told apart."""
    out = []
    for c in range(CONVERSATIONS):
        at = start + c * (WINDOWS * HOUR - 2 * HOUR) / CONVERSATIONS
        asked = (f"For conv{c:03d}: how tall is the Eiffel Tower?",
                 f"For conv{c:03d}: what is the height of the Eiffel Tower?")  # fmt: skip
        for k, question in enumerate(asked):
            out.append({
                "interaction_id": f"conv{c:03d}-t{k}", "conversation_id": f"conv{c:03d}", "app": "chat",
                "model": "beta", "question": question, "contexts": [CONTEXT],
                "answer": "The Eiffel Tower is 330 metres tall.",
                "timestamp": (at + k * timedelta(minutes=1)).isoformat(),
            })  # fmt: skip
    return out


def trace_requests(start: datetime, rng: random.Random) -> list[dict[str, Any]]:
    """Each trace (the fixture's support-bot call: a retrieval and a model call under a root span) cut in
    two pieces, its calls and then its root (an SDK exports the root last); every request holds pieces of
    two traces, the calls first."""
    template = json.loads(FIXTURE.read_text().splitlines()[0])
    resource = template["resourceSpans"][0]
    spans = resource["scopeSpans"][0]["spans"]
    calls, roots = [], []
    for t in range(TRACES):
        trace_id, at = f"{t + 1:032x}", start + t * (WINDOWS * HOUR - HOUR) / TRACES
        made = copy.deepcopy(spans)
        for n, span in enumerate(made):
            span["traceId"], span["spanId"] = trace_id, f"{t + 1:012x}{n + 1:04x}"
            nanos = int(at.timestamp() * 1e9) + n * 1_000_000_000
            span["startTimeUnixNano"], span["endTimeUnixNano"] = str(nanos), str(nanos + 500_000_000)
        root = made[-1]  # GET /chat
        for span in made[:-1]:
            span["parentSpanId"] = root["spanId"]
        calls.append(made[:-1])
        roots.append([root])
    rng.shuffle(roots)

    def request(pieces: list[list[dict[str, Any]]]) -> dict[str, Any]:
        spans = [s for piece in pieces for s in piece]
        scope = {**resource["scopeSpans"][0], "spans": spans}
        return {"resourceSpans": [{**resource, "scopeSpans": [scope]}]}

    return [request(calls[i : i + 2]) for i in range(0, TRACES, 2)] + [
        request(roots[i : i + 2]) for i in range(0, TRACES, 2)
    ]


@pytest.fixture()
def hook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    receiver.codes.clear()
    yield receiver
    receiver.close()


def sql(clickhouse: str, query: str) -> list[dict[str, Any]]:
    body = httpx.post(clickhouse, content=f"{query} FORMAT JSONEachRow".encode(), timeout=60)
    body.raise_for_status()
    return [json.loads(line) for line in body.text.splitlines() if line.strip()]


def count(clickhouse: str, query: str) -> int:
    rows = sql(clickhouse, query)
    return int(next(iter(rows[0].values()))) if rows else 0


class Group:
    """The workers of one deployment, each with its own status file, web port and log."""

    def __init__(self, dep: LocalStack, workdir: Path, tree: Path | None = None) -> None:
        self.dep, self.workdir, self.tree = dep, workdir, tree  # tree: the checkout the workers run from
        self.workers: dict[str, WorkerProcess] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str) -> WorkerProcess:
        status = self.workdir / f"{name}.json"
        port = free_port(0)
        env = self.dep.env() | {"GROUNDWATCH_CLICKHOUSE__STATUS_FILE": str(status),
                                "GROUNDWATCH_KAFKA__WEB_PORT": str(port)}  # fmt: skip
        self.workers[name] = spawn_worker(env, self.workdir / f"{name}.log", status, cwd=self.tree)
        self.ports[name] = port
        return self.workers[name]

    def logs(self) -> dict[str, str]:
        return {n: w.log.read_text(encoding="utf-8", errors="replace") for n, w in self.workers.items()}


OWNER = re.compile(r"owner of \S+ partitions \[([\d, ]*)\]")


def closes_by_owner(logs: dict[str, str]) -> dict[tuple[str, ...], list[str]]:
    """Who closed each window (app, model, start -> worker names), checking as it reads each worker's log
    that the worker owned the series' partition (its last "owner of" line) when it closed it."""
    out: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for name, text in logs.items():
        owned: set[int] = set()
        for line in text.splitlines():
            if (found := OWNER.search(line)) is not None:
                owned = {int(p) for p in found.group(1).split(",") if p.strip()}
            elif (closed := CLOSED.search(line)) is not None:
                start, app, model = closed.groups()
                partition = partition_of(touch_key(app, model), PARTITIONS)
                assert partition in owned, f"{name} closed {app}/{model} {start} without owning it: {line}"
                out[(start, app, model)].append(name)
    return out


def post_traces(requests: list[dict[str, Any]], ports: list[int]) -> None:
    """Each request to the next worker's OTLP/HTTP receiver in turn."""
    with httpx.Client(timeout=30) as client:
        for i, body in enumerate(requests):
            answer = client.post(f"http://127.0.0.1:{ports[i % len(ports)]}/v1/traces", json=body)
            assert answer.status_code == 200, answer.text


def test_three_workers_share_the_work_and_do_each_piece_once(hook: WebhookReceiver, tmp_path: Path) -> None:
    rng = random.Random(41)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - 20 * HOUR
    records = plain(start) + conversation_turns(start)
    records.sort(key=lambda r: str(r["timestamp"]))
    assert len(records) == 6000
    traces = trace_requests(start, rng)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(hook=hook.url), encoding="utf-8")
    with (
        TansuBroker(log_path=tmp_path / "tansu.log") as broker,
        ChdbHttpServer(tmp_path / "chdb") as ch,
        FakeOpenAIServer() as judge,
    ):
        clickhouse = ch + "/groundwatch"
        dep = deployment(broker.url, tmp_path, extra_env={
            **fake_judge(judge.base_url),
            "GROUNDWATCH_CLICKHOUSE__URL": clickhouse,
            "GROUNDWATCH_KAFKA__PARTITIONS": str(PARTITIONS),
            "GROUNDWATCH_KAFKA__OTLP_INPUT": "true",
            "GROUNDWATCH_KAFKA__WEB_ENABLED": "true",  # OTLP/HTTP on each worker's web server
            "GROUNDWATCH_KAFKA__SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_S),
            "GROUNDWATCH_ALERTS__RULES_FILE": str(rules),
            "GROUNDWATCH_WINDOW__SIZE_SECONDS": "3600",
            # event time runs some 12 h in the minute the traffic takes: a window waits three hours of it
            # (a few seconds) for the rows of the workers behind the one ahead
            "GROUNDWATCH_WINDOW__GRACE_SECONDS": "10800",
            "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "5",
            "GROUNDWATCH_CONVERSATIONS__JUDGE": "llm",
            "GROUNDWATCH_CONVERSATIONS__IDLE_SECONDS": "1800",
            "GROUNDWATCH_CONVERSATIONS__QUIET_SECONDS": "5",
        })  # fmt: skip
        group = Group(dep, tmp_path)
        try:
            for name in ("a", "b", "c"):
                group.start(name)
            for w in group.workers.values():
                w.wait_ready(180)
            half = len(records) // 3

            def stored() -> int:
                return count(ch, "SELECT count() FROM groundwatch.evaluations FINAL")

            assert asyncio.run(replay(dep.settings(), jsonl(records[:half]), rate=200)).sent == half
            post_traces(traces[: TRACES // 2], list(group.ports.values()))  # the calls' pieces
            wait_for(lambda: stored() >= half // 2, 300, "a share of the traffic stored")
            group.workers["c"].kill()  # SIGKILL mid-run: its partitions move to a and b
            killed_at = time.monotonic()
            rest = records[half:]
            assert asyncio.run(replay(dep.settings(), jsonl(rest), rate=200)).sent == len(rest)
            post_traces(traces[TRACES // 2 :], [group.ports["a"], group.ports["b"]])  # the roots
            group.start("c2")  # started again: the group gives it partitions back
            group.workers["c2"].wait_ready(180)
            wait_for(lambda: stored() >= len(records) + TRACES, 600, "every interaction and trace stored")
            wait_for(
                lambda: count(ch, "SELECT count() FROM groundwatch.conversations FINAL WHERE app = 'chat'")
                >= CONVERSATIONS, 300, "every conversation rolled up",
            )  # fmt: skip
            wait_for(lambda: any(b["alert"]["state"] == "firing" for b in hook.bodies), 300, "the firing")
            wait_for(lambda: count(ch, "SELECT count() FROM groundwatch.window_aggregates FINAL")
                     >= len(APPS) * WINDOWS, 300, "every window written")  # fmt: skip
            moved_s = time.monotonic() - killed_at
            # a SIGTERM while the group rebalances (a worker joining) ends within the shutdown timeout
            group.start("d")
            group.workers["d"].wait_ready(180)
            began = time.monotonic()
            code = group.workers["a"].stop(timeout=SHUTDOWN_S + 30)
            stop_s = time.monotonic() - began
            assert code == 0 and stop_s < SHUTDOWN_S + 10, (code, stop_s, group.workers["a"].tail())
        finally:
            for name, w in group.workers.items():
                if name != "c":
                    w.stop(timeout=SHUTDOWN_S + 30)
        logs = group.logs()
        reasks = [b for b in judge.stats.bodies if "pairs of user messages" in json.dumps(b)]

        # nothing lost or doubled
        ids = sql(
            ch, "SELECT count() AS n, uniqExact(interaction_id) AS ids FROM groundwatch.evaluations FINAL"
        )
        assert ids == [{"n": str(len(records) + TRACES), "ids": str(len(records) + TRACES)}] or ids == [
            {"n": len(records) + TRACES, "ids": len(records) + TRACES}
        ], ids
        # every trace one complete interaction, though its pieces came in requests mixing traces
        traced = sql(ch, "SELECT count() AS n, sum(complete) AS complete FROM groundwatch.evaluations FINAL "
                         "WHERE app = 'support-bot'")  # fmt: skip
        assert {k: int(v) for k, v in traced[0].items()} == {"n": TRACES, "complete": TRACES}, traced
        # each conversation one row of two turns, judged once but for a close in flight at the kill
        turns = sql(
            ch, "SELECT conversation_id, turns FROM groundwatch.conversations FINAL WHERE app = 'chat'"
        )
        assert sorted(int(r["turns"]) for r in turns) == [2] * CONVERSATIONS
        calls = Counter(c for b in reasks for c in set(re.findall(r"conv\d{3}", json.dumps(b))))
        assert set(calls) == {f"conv{c:03d}" for c in range(CONVERSATIONS)}
        twice = [c for c, n in calls.items() if n > 1]
        assert max(calls.values()) <= 2 and len(twice) <= 20, (len(twice), twice[:10])
        # each window closed by its owner only: every close by a worker that then owned the partition of
        # the touches topic its series keys to (by its last "owner of" line), so by one worker at a time,
        # not by every worker; written again only for rows that came after (the dead worker's,
        # redelivered once the group gave its partitions away)
        closes = closes_by_owner(logs)
        plain_windows = [k for k in closes if k[1] in APPS]
        assert len(plain_windows) == len(APPS) * WINDOWS
        closers = Counter(len(set(closes[k])) for k in plain_windows)
        per_window = sum(len(closes[k]) for k in plain_windows) / len(plain_windows)
        print(f"closers per window {dict(closers)}; writes per window {per_window:.2f}; judged twice "
              f"{len(twice)}; the work moved and done {moved_s:.0f} s after the kill; stop during a "
              f"rebalance {stop_s:.1f} s")  # fmt: skip
        assert per_window < 2.5, per_window  # three workers each closing every window: 3 or more
        # the drift fired once
        firings = [b for b in hook.bodies if b["alert"]["state"] == "firing"]
        assert len(firings) == 1 and firings[0]["alert"]["app"] == "wiki-qa", hook.bodies
