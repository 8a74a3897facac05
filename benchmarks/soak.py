"""Memory soak: one worker at a steady, modest rate for a long time; RSS slope after warm-up.

    python benchmarks/soak.py [--rate 20] [--duration 1200] [--warmup 300] [--judge openai|lexical]
        [--tracemalloc 10] [--json build/bench/soak.json]

Starts Tansu, the fake OpenAI-compatible judge (instant, cache off: every interaction costs its calls)
and one ``groundwatch worker`` (through ``benchmarks/soak_worker.py``: the same CLI plus in-process
memory probes) with its own embedded chDB path, produces dev interactions at ``--rate`` a second for
``--duration`` seconds (fresh ids, ``timestamp`` = the moment each is sent), waits until every one is a
row in ClickHouse, stops the worker and reads the rows back (each interaction must be there once).

Figures: the worker's RSS every second (summed over its processes: ``--processes``, one per core by default)
and its least-squares slope (MB/min) over the samples after
``--warmup`` seconds until the last produce (the drain is left out), the same slope for what the
process's parts hold (probes every 10 s: chDB's own ``MemoryTracking``, glibc malloc's bytes in use,
the Python heap when ``--tracemalloc`` is on, the count of Python objects the GC tracks), and, with
``--tracemalloc``, the 15 source lines whose Python allocations grew most between the snapshot at the
end of the warm-up and the last one. The machine has 2 cores shared with other work: keep runs modest
(the defaults take ~21 minutes and ~0.3 of a core).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, write_json  # noqa: E402
from benchmarks.streamkit import (  # noqa: E402
    DEFAULT_DATA,
    RunConfig,
    Sampler,
    Stack,
    produce,
    read_rows,
    traffic,
)
from groundwatch.local.supervise import WorkerProcess  # noqa: E402


def slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (t seconds, value) in value units a minute."""
    if len(points) < 3:
        return None
    ts = [t for t, _ in points]
    vs = [v for _, v in points]
    mt, mv = statistics.fmean(ts), statistics.fmean(vs)
    den = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (v - mv) for t, v in points) / den * 60 if den else None


class SoakStack(Stack):
    """The benchmark stack with the worker started through soak_worker.py (memory probes inside)."""

    def __init__(self, cfg: RunConfig, tracemalloc_frames: int) -> None:
        super().__init__(cfg)
        self.tracemalloc_frames = tracemalloc_frames

    @property
    def probe_file(self) -> Path:
        return self.cfg.workdir / "worker0" / "probes.jsonl"

    @property
    def snapshot_dir(self) -> Path:
        return self.cfg.workdir / "worker0" / "snapshots"

    def start(self) -> None:
        # the broker, the fake judge and the topics as Stack.start does, without its workers
        workers, self.cfg.workers = self.cfg.workers, 0
        try:
            super().start()
        finally:
            self.cfg.workers = workers
        env = self.env(0)
        wd = self.cfg.workdir / "worker0"
        cmd = [
            sys.executable, str(REPO / "benchmarks" / "soak_worker.py"),
            "--probe-file", str(self.probe_file), "--interval", "10",
            "--tracemalloc", str(max(1, self.tracemalloc_frames)),
            "--snapshot-dir", str(self.snapshot_dir),
            "--", "--loglevel", "info",
        ]  # fmt: skip
        log = wd / "worker.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(cmd, env=env, cwd=wd, stdout=out, stderr=subprocess.STDOUT)
        worker = WorkerProcess(proc, log, wd / "status.json")
        self.workers.append(worker)
        worker.wait_ready(180)
        time.sleep(2.0 if self.wait_for_judging_processes() <= 0 else 8.0)

    def request_snapshot(self, name: str) -> None:
        """Ask the worker to start tracing (``start``) or for a snapshot (its next probe, within 10 s)."""
        if self.tracemalloc_frames:
            self.snapshot_dir.mkdir(parents=True, exist_ok=True)
            (self.snapshot_dir / f"{name}.request").touch()


def snapshot_growth(directory: Path, top: int = 15) -> list[str]:
    """The Python allocations made after the warm-up (tracing started then) still alive at the end."""
    path = directory / "end.pickle"
    if not path.exists():
        return []
    snap = tracemalloc.Snapshot.load(str(path))
    total = sum(s.size for s in snap.statistics("filename"))
    lines = [f"tracemalloc: {total / 1e6:.2f} MB allocated after the warm-up still alive; top {top} lines:"]
    for stat in snap.statistics("lineno")[:top]:
        lines.append(f"  {stat.size / 1e6:8.3f} MB {stat.count:8d} blocks  {stat.traceback[0]}")
    lines.append(f"top {min(5, top)} by traceback:")
    for stat in snap.statistics("traceback")[: min(5, top)]:
        lines.append(f"  {stat.size / 1e6:8.3f} MB {stat.count:8d} blocks")
        lines += [f"      {frame}" for frame in stat.traceback.format()[-12:]]
    return lines


def probe_figures(probe_file: Path, since: float, until: float) -> dict[str, Any]:
    rows = [json.loads(x) for x in probe_file.read_text().splitlines() if x.strip()]
    out: dict[str, Any] = {"probes": len(rows)}
    for key in (
        "rss_mb",
        "rss_anon_mb",
        "rss_file_mb",
        "chdb_tracked_mb",
        "chdb_jemalloc_mb",
        "malloc_mb",
        "python_traced_mb",
        "gc_objects",
        "chdb_active_parts",
    ):
        pts = [(r["t"], float(r[key])) for r in rows if isinstance(r.get(key), int | float)]
        window = [(t, v) for t, v in pts if since <= t <= until]
        if pts:
            out[key] = {
                "first": pts[0][1],
                "at_warmup": window[0][1] if window else None,
                "last": pts[-1][1],
                "max": max(v for _, v in pts),
                "slope_per_min_after_warmup": slope_per_min(window),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=20.0, help="interactions a second")
    ap.add_argument("--duration", type=float, default=1200.0, help="seconds of producing")
    ap.add_argument("--warmup", type=float, default=300.0, help="seconds left out of the slope")
    ap.add_argument("--judge", choices=["openai", "lexical"], default="openai")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument(
        "--processes", type=int, default=0,
        help="the worker's processes (kafka.processes); 0: its default, one per core (RSS: all of them)",
    )  # fmt: skip
    ap.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        help="trace Python allocations after the warm-up, N frames (slower)",
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--env", action="append", default=[], help="extra GROUNDWATCH_X=Y for the worker")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    cfg = RunConfig(
        workdir=args.workdir or REPO / "build" / "bench" / f"soak-{time.strftime('%H%M%S')}",
        judge=args.judge, partitions=args.partitions, rate=args.rate, duration_s=args.duration,
        drain_timeout_s=600.0, data=args.data, extra_env=dict(e.split("=", 1) for e in args.env),
        processes=args.processes or None,
    )  # fmt: skip
    records, source = traffic(cfg.data)
    print(f"traffic: {source}; {args.rate}/s for {args.duration:.0f}s; judge {args.judge}", flush=True)
    stack = SoakStack(cfg, args.tracemalloc)
    try:
        stack.start()
        worker = stack.workers[0]
        sampler = Sampler(stack, machine)
        sampler.start()
        t_start = time.time()
        timer = threading.Timer(args.warmup, stack.request_snapshot, ("start",))
        timer.start()
        produced, _, produce_s = asyncio.run(produce(stack.settings(), records, args.rate, args.duration, 0))
        t_end = time.time()
        timer.cancel()
        stack.request_snapshot("end")
        time.sleep(12)  # the worker's probe takes it within 10 s
        print(f"produced {produced} in {produce_s:.0f}s", flush=True)
        deadline = time.monotonic() + cfg.drain_timeout_s
        while worker.evaluations() < produced and time.monotonic() < deadline and worker.alive():
            time.sleep(1.0)
        sampler.stop()
        code = worker.stop(timeout=120)
        rows = read_rows(cfg.workdir / "worker0" / "chdb")
    finally:
        stack.close()
    machine.finish()
    rss = [(s.t, s.rss_mb[0]) for s in sampler.samples if s.rss_mb and s.rss_mb[0] is not None]
    after = [(t, v) for t, v in rss if t_start + args.warmup <= t <= t_end]
    ids = [r[0] for r in rows]
    fig: dict[str, Any] = {
        "produced": produced,
        "rows": len(ids),
        "distinct": len(set(ids)),
        "stop_code": code,
        "rss_first_mb": rss[0][1] if rss else None,
        "rss_at_warmup_mb": after[0][1] if after else None,
        "rss_last_mb": rss[-1][1] if rss else None,
        "rss_max_mb": max(v for _, v in rss) if rss else None,
        "rss_slope_mb_per_min_after_warmup": slope_per_min(after),
        "rss_slope_mb_per_min_whole_run": slope_per_min([(t, v) for t, v in rss if t <= t_end]),
        "rss_series_mb": [round(v) for _, v in rss[:: max(1, len(rss) // 25)]],
        "load1": [round(s.load1, 2) for s in sampler.samples[:: max(1, len(sampler.samples) // 25)]],
        "parts": probe_figures(stack.probe_file, t_start + args.warmup, t_end),
    }
    print()
    print(
        f"rows: {fig['rows']} ({fig['distinct']} distinct) of {produced} produced; worker stop code {code}\n"
        f"RSS: first {fig['rss_first_mb']:.0f} MB, at the end of the warm-up "
        f"{fig['rss_at_warmup_mb']:.0f} MB, last {fig['rss_last_mb']:.0f} MB, "
        f"max {fig['rss_max_mb']:.0f} MB\n"
        f"RSS slope after the {args.warmup:.0f} s warm-up: "
        f"{fig['rss_slope_mb_per_min_after_warmup']:+.2f} MB/min "
        f"(whole run {fig['rss_slope_mb_per_min_whole_run']:+.2f} MB/min)\n"
        f"RSS series (MB, {len(fig['rss_series_mb'])} points): {fig['rss_series_mb']}\n"
        f"load average (1 min) over the run: {fig['load1']}"
    )
    for key, v in fig["parts"].items():
        if isinstance(v, dict):
            s = v["slope_per_min_after_warmup"]
            print(
                f"  {key:>20}: first {v['first']:.1f}, at warm-up {v['at_warmup']}, last {v['last']:.1f}, "
                f"max {v['max']:.1f}, slope after warm-up {s if s is None else round(s, 3)} a minute"
            )
    diff = snapshot_growth(stack.snapshot_dir)
    if diff:
        print("\n".join(diff))
        fig["tracemalloc_top"] = diff
    print()
    print(machine.describe())
    ran_with = vars(args) | {"workdir": cfg.workdir, "data": cfg.data}
    write_json(args.json, {"machine": machine.as_dict(), "args": ran_with, "figures": fig})
    return 0


if __name__ == "__main__":
    sys.exit(main())
