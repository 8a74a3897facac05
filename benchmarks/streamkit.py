"""Shared machinery of the stream benchmarks: Tansu + fake judge + N workers, a paced producer,
samplers, and the figures read back from ClickHouse and from the evaluations topic.

Every process binds 127.0.0.1 only. Each worker is ``groundwatch worker`` (groundwatch.local.supervise) with
its own embedded chDB path, status file and faust data directory; all workers share the broker, the topic
prefix and the consumer group. Rows are read after the workers stopped, each path in a child process
(benchmarks/chdb_rows.py): chDB allows one engine path per process.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from benchmarks.machine import REPO, Machine, tree_cpu_seconds, tree_rss_mb
from groundwatch.local.supervise import WorkerProcess, spawn_worker, wait_for
from groundwatch.local.tansu import TansuBroker, worker_env
from pipeline.dataset import read_dataset
from pipeline.net import free_port
from schemas.settings import Settings
from streams.topics import bootstrap_servers, ensure_topics, topic_names

DEFAULT_DATA = REPO.parent / "shared" / "data"
SETS = ("grounding_faithbench.jsonl", "grounding_halueval_qa.jsonl")
SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"


def traffic(data: Path, n: int = 200) -> tuple[list[dict[str, Any]], str]:
    """Interaction records (dicts, as produced) from the dev sets, or the bundled sample traffic."""
    recs: list[dict[str, Any]] = []
    if all((data / s).is_file() for s in SETS):
        for name in SETS:
            recs += [
                line.interaction.model_dump(mode="json", exclude={"timestamp", "labels"})
                for line in read_dataset(data / name, limit=n // len(SETS)).lines
            ]
        return recs, f"{len(recs)} records: " + " + ".join(f"{n // len(SETS)} {s}" for s in SETS)
    recs = [
        line.interaction.model_dump(mode="json", exclude={"timestamp", "labels"})
        for line in read_dataset(SAMPLE, limit=n).lines
    ]
    return recs, f"{len(recs)} records of {SAMPLE} ({data} absent)"


@dataclass
class RunConfig:
    workdir: Path
    judge: str = "openai"  # openai (the fake judge) or lexical (no HTTP)
    latency_ms: float = 0.0
    in_flight: int = 32
    partitions: int = 4
    workers: int = 1
    rate: float = 0.0  # interactions a second; 0 = all at once (a backlog)
    duration_s: float = 60.0  # producing time when rate > 0
    count: int = 5000  # interactions when rate == 0
    drain_timeout_s: float = 300.0
    data: Path = DEFAULT_DATA
    extra_env: dict[str, str] = field(default_factory=dict)
    profile: str | None = None  # py-spy: record the first worker into this file (svg/speedscope)
    profile_seconds: float = 30.0
    stage_times: bool = False  # read every topic's message timestamps: when each stage wrote its outputs
    conversation_turns: int = 0  # > 0: consecutive records are turns of conversations this long
    tree: Path = REPO  # the checkout the workers run from (a baseline worktree, for a comparison)
    processes: int | None = 1  # each worker's judging processes (kafka.processes); None: every core


@dataclass
class Sample:
    t: float
    rss_mb: list[float | None]
    cpu_s: list[float | None]
    evaluations: list[int]
    load1: float
    judge_requests: int | None = None  # the fake judge's request counter


@dataclass
class RunResult:
    config: dict[str, Any]
    produced: int
    produce_seconds: float
    first_produce: float
    rows: list[list[tuple[str, int, int, int, int, int, int, int]]]  # per worker
    samples: list[Sample]
    fake_stats: dict[str, Any] | None
    topic_total: int | None = None
    topic_distinct: int | None = None
    drained: bool = True
    stop_codes: list[int] = field(default_factory=list)
    worker_logs: list[str] = field(default_factory=list)
    # topic -> seconds after the first produce at which its messages were appended: first, p10, p50, p90, last
    stage_times: dict[str, list[float]] = field(default_factory=dict)


class Stack:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        cfg.workdir = cfg.workdir.resolve()  # chdb URLs need an absolute path
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        self.prefix = f"bench{uuid.uuid4().hex[:6]}."
        self.broker = TansuBroker(log_path=cfg.workdir / "tansu.log")
        self.fake: subprocess.Popen[bytes] | None = None
        self.fake_port = free_port()
        self.workers: list[WorkerProcess] = []

    @property
    def fake_stats_file(self) -> Path:
        return self.cfg.workdir / "fake_judge.json"

    def env(self, index: int) -> dict[str, str]:
        cfg = self.cfg
        wd = cfg.workdir / f"worker{index}"
        wd.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWATCH_")}
        env.update(worker_env(self.broker.url))
        env.update(
            {
                "PYTHONPATH": str(cfg.tree),
                "GROUNDWATCH_KAFKA__TOPIC_PREFIX": self.prefix,
                "GROUNDWATCH_KAFKA__CONSUMER_GROUP": f"{self.prefix}group",
                "GROUNDWATCH_KAFKA__PARTITIONS": str(cfg.partitions),
                "GROUNDWATCH_KAFKA__DATADIR": str(wd / "faust"),
                "GROUNDWATCH_KAFKA__WEB_PORT": str(free_port()),
                "GROUNDWATCH_CLICKHOUSE__URL": f"chdb://{wd / 'chdb'}",
                "GROUNDWATCH_CLICKHOUSE__STATUS_FILE": str(wd / "status.json"),
                "GROUNDWATCH_JUDGE__KIND": cfg.judge,
                "GROUNDWATCH_JUDGE__MAX_IN_FLIGHT": str(cfg.in_flight),
                # repeated traffic: every interaction must cost its calls, as new traffic would
                "GROUNDWATCH_JUDGE__CACHE_ENABLED": "false",
            }
        )
        if cfg.judge == "openai":
            env.update(
                {
                    "GROUNDWATCH_JUDGE__BASE_URL": f"http://127.0.0.1:{self.fake_port}/v1",
                    "GROUNDWATCH_JUDGE__API_KEY": "x",
                    "GROUNDWATCH_JUDGE__MODEL": "fake",
                }
            )
        if cfg.processes is not None:
            env["GROUNDWATCH_KAFKA__PROCESSES"] = str(cfg.processes)
        env.update(cfg.extra_env)
        return env

    def settings(self) -> Settings:
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(self.env(0))
            return Settings()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def start(self) -> None:
        cfg = self.cfg
        self.broker.start()
        if cfg.judge == "openai":
            log = open(cfg.workdir / "fake_judge.log", "ab")
            self.fake = subprocess.Popen(
                [
                    sys.executable,
                    str(REPO / "benchmarks" / "fake_judge.py"),
                    "--port",
                    str(self.fake_port),
                    "--latency-ms",
                    str(cfg.latency_ms),
                    "--stats-file",
                    str(self.fake_stats_file),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            wait_for(self.fake_stats_file.exists, 30, "the fake judge")
        asyncio.run(ensure_topics(self.settings().kafka))
        for i in range(cfg.workers):
            env = self.env(i)
            wd = cfg.workdir / f"worker{i}"
            self.workers.append(spawn_worker(env, wd / "worker.log", wd / "status.json", cwd=wd))
        for w in self.workers:
            w.wait_ready(180)
        others = self.wait_for_judging_processes()
        # every member has its partitions (a second member joining makes the first rebalance)
        time.sleep(2.0 if cfg.workers == 1 and others <= 0 else 8.0)

    def wait_for_judging_processes(self) -> int:
        """Each worker's judging processes (logged as started before it is ready) have joined the group
        too; how many each has."""
        others = max((w.log.read_text().count(" started (pid ") for w in self.workers), default=0)
        if others > 0:
            for w in self.workers:
                wait_for(lambda w=w: w.log.read_text().count("judging process ready") >= others, 180,
                         "the judging processes")  # fmt: skip
        return others

    def judge_requests(self) -> int | None:
        try:
            return int(json.loads(self.fake_stats_file.read_text())["requests"])
        except (OSError, ValueError, KeyError):
            return None

    def evaluations(self) -> list[int]:
        return [w.evaluations() for w in self.workers]

    def stop(self) -> list[int]:
        codes = [w.stop(timeout=120) for w in self.workers]
        if self.fake is not None and self.fake.poll() is None:
            self.fake.terminate()
            self.fake.wait(30)
        return codes

    def close(self) -> None:
        for w in self.workers:
            if w.alive():
                w.kill()
        if self.fake is not None and self.fake.poll() is None:
            self.fake.kill()
        self.broker.stop()


async def produce(
    settings: Settings,
    records: list[dict[str, Any]],
    rate: float,
    duration_s: float,
    count: int,
    conversation_turns: int = 0,
) -> tuple[int, float, float]:
    """Send records (cycled, each with a new id and ``timestamp`` = the moment it is sent) at ``rate``
    a second for ``duration_s``, or ``count`` of them at once when rate is 0; with ``conversation_turns``,
    each run of that many records shares a conversation_id. Returns (sent, first send time, seconds)."""
    topic = topic_names(settings.kafka).interactions
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers(settings.kafka.broker), acks="all", linger_ms=5
    )
    await producer.start()
    run = uuid.uuid4().hex[:6]
    sent = 0
    pending: list[asyncio.Future[Any]] = []
    total = count if rate <= 0 else int(rate * duration_s)
    started = time.time()
    t0 = time.monotonic()
    try:
        while sent < total:
            if rate > 0:
                due = min(total, int((time.monotonic() - t0) * rate) + 1)
                if due <= sent:
                    await asyncio.sleep(max(0.001, (sent + 1) / rate - (time.monotonic() - t0)))
                    continue
            else:
                due = min(total, sent + 500)
            now = datetime.now(UTC).isoformat()
            while sent < due:
                rec = dict(records[sent % len(records)])
                iid = f"{rec['interaction_id']}~{run}~{sent}"
                rec["interaction_id"] = iid
                rec["timestamp"] = now
                if conversation_turns > 0:
                    rec["conversation_id"] = f"{run}~c{sent // conversation_turns}"
                pending.append(await producer.send(topic, value=json.dumps(rec).encode(), key=iid.encode()))
                sent += 1
            if len(pending) > 5000:
                await asyncio.gather(*pending)
                pending.clear()
        await producer.flush()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent, started, time.monotonic() - t0


async def read_topic(settings: Settings, topic: str, quiet_s: float = 4.0) -> list[tuple[int, bytes]]:
    """(timestamp ms, key) of every message on a topic, read from the start until nothing new for
    ``quiet_s`` (Tansu's end offsets are off by a batch, so the end is found by waiting, not by asking)."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers(settings.kafka.broker),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[tuple[int, bytes]] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            for msgs in batch.values():
                for m in msgs:
                    out.append((m.timestamp, m.key or b""))
                    last = time.monotonic()
    finally:
        await consumer.stop()
    return out


async def topic_stamps(settings: Settings, topic: str, quiet_s: float = 4.0) -> list[int]:
    """Every message's timestamp (ms) on a topic (``read_topic``), sorted."""
    return sorted(stamp for stamp, _ in await read_topic(settings, topic, quiet_s))


async def count_topic(settings: Settings, topic: str, quiet_s: float = 4.0) -> tuple[int, int]:
    """(messages, distinct keys) on a topic (``read_topic``)."""
    messages = await read_topic(settings, topic, quiet_s)
    return len(messages), len({key for _, key in messages})


def read_rows(path: Path) -> list[tuple[str, int, int, int, int, int, int, int]]:
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "chdb_rows.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if out.returncode != 0:
        raise RuntimeError(f"reading {path} failed:\n{out.stderr[-2000:]}")
    rows = []
    for line in out.stdout.splitlines():
        p = line.split("\t")
        rows.append((p[0], *(int(x) for x in p[1:])))
    return rows  # type: ignore[return-value]


class Sampler(threading.Thread):
    def __init__(self, stack: Stack, machine: Machine, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.machine = machine
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._halt = threading.Event()
        self.ticks = 0

    def run(self) -> None:
        while not self._halt.is_set():
            pids = [w.pid for w in self.stack.workers]
            self.samples.append(
                Sample(
                    t=time.time(),
                    rss_mb=[tree_rss_mb(p) for p in pids],  # with the worker's own processes
                    cpu_s=[tree_cpu_seconds(p) for p in pids],  # with the worker's own processes
                    evaluations=self.stack.evaluations(),
                    load1=os.getloadavg()[0],
                    judge_requests=self.stack.judge_requests(),
                )
            )
            if self.ticks % 10 == 0:
                self.machine.sample()
            self.ticks += 1
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    fmt = {".json": "speedscope", ".txt": "raw"}.get(out.suffix, "flamegraph")
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            "50",
            "--format",
            fmt,
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def run(cfg: RunConfig, machine: Machine, log: Any = print) -> RunResult:
    records, source = traffic(cfg.data)
    log(f"traffic: {source}, cycled with fresh ids; judge cache off")
    stack = Stack(cfg)
    try:
        stack.start()
        settings = stack.settings()
        log(
            f"stack up: Tansu {stack.broker.url}, {cfg.workers} worker(s) pid "
            f"{[w.pid for w in stack.workers]}, {cfg.partitions} partitions, judge {cfg.judge}"
            + (
                f" (fake, {cfg.latency_ms:.0f} ms a call, {cfg.in_flight} in flight)"
                if cfg.judge == "openai"
                else ""
            )
        )
        sampler = Sampler(stack, machine)
        sampler.start()
        spy = None
        if cfg.profile:
            spy = py_spy(stack.workers[0].pid, Path(cfg.profile), cfg.profile_seconds)
        produced, first, produce_s = asyncio.run(
            produce(settings, records, cfg.rate, cfg.duration_s, cfg.count, cfg.conversation_turns)
        )
        log(f"produced {produced} interactions in {produce_s:.1f}s ({produced / produce_s:.0f}/s)")
        drained = True
        deadline = time.monotonic() + cfg.drain_timeout_s
        last_report = 0.0
        while sum(stack.evaluations()) < produced:
            if any(not w.alive() for w in stack.workers):
                raise RuntimeError("a worker died:\n" + "\n".join(w.tail() for w in stack.workers))
            if time.monotonic() > deadline:
                drained = False
                log(f"drain timeout: {sum(stack.evaluations())} of {produced} in ClickHouse")
                break
            if time.monotonic() - last_report > 10:
                log(f"  ... {stack.evaluations()} of {produced} in ClickHouse")
                last_report = time.monotonic()
            time.sleep(0.5)
        if spy is not None:
            spy.wait(timeout=cfg.profile_seconds + 60)
            log("py-spy: " + (spy.stdout.read().decode(errors="replace")[-500:] if spy.stdout else ""))
        sampler.stop()
        topic_total = topic_distinct = None
        codes = stack.stop()
        try:
            topic_total, topic_distinct = asyncio.run(
                count_topic(settings, topic_names(settings.kafka).evaluations)
            )
        except Exception as exc:  # the figures from ClickHouse still stand
            log(f"could not count the evaluations topic: {exc!r}")
        stage_times: dict[str, list[float]] = {}
        if cfg.stage_times:
            names = topic_names(settings.kafka)
            for topic in (names.interactions, names.converted, names.judged, names.evaluations):
                stamps = asyncio.run(topic_stamps(settings, topic))
                if stamps:
                    rel = [x / 1000.0 - first for x in stamps]
                    mid = [rel[min(len(rel) - 1, int(f * len(rel)))] for f in (0.1, 0.5, 0.9)]
                    q = [rel[0], *mid, rel[-1]]
                    stage_times[topic.rsplit(".", 1)[-1]] = [round(v, 2) for v in q]
        rows = [read_rows(stack.cfg.workdir / f"worker{i}" / "chdb") for i in range(cfg.workers)]
        fake_stats = json.loads(stack.fake_stats_file.read_text()) if stack.fake_stats_file.exists() else None
        return RunResult(
            config={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()},
            produced=produced,
            produce_seconds=produce_s,
            first_produce=first,
            rows=rows,
            samples=sampler.samples,
            fake_stats=fake_stats,
            topic_total=topic_total,
            topic_distinct=topic_distinct,
            drained=drained,
            stop_codes=codes,
            worker_logs=[str(w.log) for w in stack.workers],
            stage_times=stage_times,
        )
    finally:
        stack.close()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def figures(res: RunResult) -> dict[str, Any]:
    """Throughput, latency, calls, memory and CPU from a run."""
    all_rows = [r for rows in res.rows for r in rows]
    first: dict[str, tuple[str, int, int, int, int, int, int, int]] = {}
    for r in all_rows:
        if r[0] not in first or r[3] < first[r[0]][3]:
            first[r[0]] = r
    ins = sorted(r[3] for r in first.values())
    n = len(first)
    out: dict[str, Any] = {
        "produced": res.produced,
        "produce_rate": res.produced / res.produce_seconds if res.produce_seconds else None,
        "rows_total": len(all_rows),
        "rows_distinct": n,
        "rows_per_worker": [len(r) for r in res.rows],
        "distinct_per_worker": [len({x[0] for x in r}) for r in res.rows],
        "topic_total": res.topic_total,
        "topic_distinct": res.topic_distinct,
        "drained": res.drained,
    }
    if n >= 10:
        i10, i90 = int(n * 0.1), int(n * 0.9) - 1
        span = (ins[i90] - ins[i10]) / 1000.0
        out["insert_rate_middle80"] = (i90 - i10) / span if span > 0 else None
        out["throughput_overall"] = n / max(1e-3, (ins[-1] / 1000.0 - res.first_produce))
        out["first_to_last_insert_s"] = (ins[-1] - ins[0]) / 1000.0
        # how soon rows land under a backlog: the first tenth of them in ClickHouse, after the first produce
        out["first_tenth_in_s"] = ins[max(0, n // 10 - 1)] / 1000.0 - res.first_produce
        lat = [(r[3] - r[1]) / 1000.0 for r in first.values()]
        join_lat = [(r[2] - r[1]) / 1000.0 for r in first.values()]
        out["latency_s"] = {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "max": max(lat)}
        out["latency_to_evaluated_at_s"] = {"p50": pct(join_lat, 0.5), "p99": pct(join_lat, 0.99)}
        # latency over the run: the median of each tenth (grows when the worker falls behind)
        by_ts = sorted(first.values(), key=lambda r: r[1])
        tenths = [by_ts[i * n // 10 : (i + 1) * n // 10] for i in range(10)]
        out["latency_p50_by_tenth_s"] = [
            round(statistics.median([(r[3] - r[1]) / 1000.0 for r in t]), 2) for t in tenths if t
        ]
        out["judge_calls_per_interaction"] = calls = sum(r[4] for r in first.values()) / n
        # steady work rate: judge requests/s while the middle 80% of them were made (the fake judge's
        # counter, sampled every second), in interactions/s; end-to-end rates include start and drain
        reqs = [(s.t, s.judge_requests) for s in res.samples if s.judge_requests is not None]
        if reqs and reqs[-1][1] and calls > 0:
            final = reqs[-1][1]
            t10 = next(t for t, r in reqs if r >= 0.1 * final)
            t90 = next(t for t, r in reqs if r >= 0.9 * final)
            if t90 > t10:
                r10 = next(r for t, r in reqs if t == t10)
                r90 = next(r for t, r in reqs if t == t90)
                out["judge_requests_per_s_steady"] = (r90 - r10) / (t90 - t10)
                out["throughput_steady_judge"] = out["judge_requests_per_s_steady"] / calls
        out["input_tokens_per_interaction"] = sum(r[5] for r in first.values()) / n
        out["incomplete"] = sum(1 for r in first.values() if not r[7])
    # memory and CPU per worker
    mem = []
    for i in range(len(res.rows)):
        rss: list[tuple[float, float]] = []
        cpu: list[tuple[float, float]] = []
        for s in res.samples:
            mb = s.rss_mb[i] if i < len(s.rss_mb) else None
            c = s.cpu_s[i] if i < len(s.cpu_s) else None
            if mb is not None:
                rss.append((s.t, mb))
            if c is not None:
                cpu.append((s.t, c))
        if not rss:
            continue
        vals = [v for _, v in rss]
        k = max(1, len(vals) // 10)
        slope = None
        if len(rss) >= 3:
            ts = [t for t, _ in rss]
            mt, mv = statistics.fmean(ts), statistics.fmean(vals)
            den = sum((t - mt) ** 2 for t in ts)
            slope = sum((t - mt) * (v - mv) for t, v in rss) / den * 60 if den else None
        entry = {
            "samples": len(vals),
            "first_mb": vals[0],
            "last_mb": vals[-1],
            "max_mb": max(vals),
            "mean_first_tenth_mb": statistics.fmean(vals[:k]),
            "mean_last_tenth_mb": statistics.fmean(vals[-k:]),
            "slope_mb_per_min": slope,
            # RSS every ~30 s (MB): flat, growing, or a plateau after warm-up
            "series_mb": [round(v) for _, v in rss[:: max(1, len(rss) // 20)]],
        }
        if len(cpu) >= 2 and cpu[-1][0] > cpu[0][0]:
            entry["cpu_cores_used"] = (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0])
            entry["cpu_seconds"] = cpu[-1][1] - cpu[0][1]
        mem.append(entry)
    out["workers"] = mem
    if n and all("cpu_seconds" in w for w in mem):  # every process of every worker, over the whole run
        out["cpu_ms_per_interaction"] = 1000.0 * sum(w["cpu_seconds"] for w in mem) / n
    if res.stage_times:
        out["stage_times_s"] = res.stage_times
    if res.fake_stats:
        out["fake_judge"] = {k: res.fake_stats.get(k) for k in ("requests", "max_in_flight", "prompt_tokens")}
    return out
