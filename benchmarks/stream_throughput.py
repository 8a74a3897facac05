"""End to end through the real Tansu broker and embedded chDB: throughput, latency, memory of a worker.

    python benchmarks/stream_throughput.py [--latency-ms 0] [--rate 0 --count 5000 | --rate R --duration S]
        [--judge openai|lexical] [--in-flight 32] [--partitions 4] [--profile build/bench/x.svg]
        [--json build/bench/stream.json]

Starts Tansu, the fake OpenAI-compatible judge (benchmarks/fake_judge.py, answering after
``--latency-ms``; GROUNDWATCH_JUDGE__KIND=openai, __BASE_URL=the fake, __API_KEY=x, cache off so repeated
traffic costs its calls) and one ``groundwatch worker`` with its own chDB path; produces dev interactions
(cycled, fresh ids, ``timestamp`` = the moment each is sent) either all at once (``--rate 0``: a backlog
of ``--count``, for the sustained rate) or paced at ``--rate`` for ``--duration`` seconds (latency at a
given load; the 10-minute memory run); waits until every interaction is a row in ClickHouse, stops the
worker (it flushes) and reads the rows back.

Figures: sustained interactions/s (first insert of the middle 80% of interactions: 0.8 N / (t90 - t10)),
latency from produce (``timestamp``) to the row's ``inserted_at`` in ``evaluations`` (p50/p99), judge
calls per interaction (the rows' ``judge_calls``), the bound that ``--in-flight`` calls of
``--latency-ms`` set (in_flight / (calls per interaction x latency)) and the fraction achieved, the
worker's RSS (sampled every second: first/last/max and the slope) and CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import REPO, Machine, write_json  # noqa: E402
from benchmarks.streamkit import DEFAULT_DATA, RunConfig, figures, run  # noqa: E402


def report(fig: dict[str, Any], cfg: RunConfig) -> list[str]:
    lines = [
        f"produced {fig['produced']} ({fig['produce_rate']:.0f}/s offered); rows in ClickHouse: "
        f"{fig['rows_distinct']} distinct, {fig['rows_total']} total; drained: {fig['drained']}",
    ]
    if "throughput_overall" in fig:
        lat, jl = fig["latency_s"], fig["latency_to_evaluated_at_s"]
        steady = fig.get("throughput_steady_judge")
        lines += [
            f"throughput: {fig['throughput_overall']:.1f} interactions/s end to end (first produce to last "
            f"row)"
            + (
                f"; {steady:.1f}/s steady work rate ({fig['judge_requests_per_s_steady']:.0f} judge "
                "requests/s over the middle 80% of them)"
                if steady
                else ""
            ),
            f"latency produce -> row in ClickHouse: p50 {lat['p50']:.2f}s, p99 {lat['p99']:.2f}s, "
            f"max {lat['max']:.2f}s (produce -> Evaluation assembled: p50 {jl['p50']:.2f}s, "
            f"p99 {jl['p99']:.2f}s)",
            f"latency p50 by tenth of the run (s): {fig['latency_p50_by_tenth_s']}; the first tenth of the "
            f"rows in ClickHouse {fig['first_tenth_in_s']:.2f}s after the first produce",
            f"judge calls per interaction {fig['judge_calls_per_interaction']:.2f}, input tokens "
            f"{fig['input_tokens_per_interaction']:.0f}; incomplete rows {fig['incomplete']}",
        ]
        if cfg.judge == "openai" and cfg.latency_ms > 0:
            slots = cfg.in_flight * cfg.workers  # each worker has its own judge client and bound
            bound = slots / (fig["judge_calls_per_interaction"] * cfg.latency_ms / 1000.0)
            fig["bound"] = bound
            achieved = steady or fig["throughput_overall"]
            fig["fraction_of_bound"] = achieved / bound
            fig["fraction_of_bound_end_to_end"] = fig["throughput_overall"] / bound
            lines.append(
                f"bound of {slots} calls in flight at {cfg.latency_ms:.0f} ms: {slots} / "
                f"({fig['judge_calls_per_interaction']:.2f} x {cfg.latency_ms / 1000:.1f}s) = {bound:.1f}/s; "
                f"steady {achieved:.1f}/s = {100 * fig['fraction_of_bound']:.1f}% of it, end to end "
                f"{100 * fig['fraction_of_bound_end_to_end']:.1f}%"
            )
    if "cpu_ms_per_interaction" in fig:
        cpu = fig["cpu_ms_per_interaction"]
        lines.append(f"workers' CPU an interaction (all their processes): {cpu:.2f} ms")
    for i, w in enumerate(fig["workers"]):
        slope = w["slope_mb_per_min"]
        lines.append(
            f"worker {i} RSS: first {w['first_mb']:.0f} MB, last {w['last_mb']:.0f} MB, "
            f"max {w['max_mb']:.0f} MB"
            f" (mean of first/last tenth {w['mean_first_tenth_mb']:.0f}/{w['mean_last_tenth_mb']:.0f} MB, "
            f"slope {slope if slope is None else round(slope, 2)} MB/min, {w['samples']} samples); "
            f"CPU {w.get('cpu_cores_used', float('nan')):.2f} cores"
        )
        lines.append(f"worker {i} RSS over the run (MB, {len(w['series_mb'])} points): {w['series_mb']}")
    for topic, q in fig.get("stage_times_s", {}).items():
        lines.append(
            f"topic {topic:>12}: written {q[0]:.1f}s .. {q[4]:.1f}s after the first produce "
            f"(p10 {q[1]:.1f}, p50 {q[2]:.1f}, p90 {q[3]:.1f})"
        )
    if "fake_judge" in fig:
        fj = fig["fake_judge"]
        lines.append(f"fake judge: {fj['requests']} requests, max {fj['max_in_flight']} in flight")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--judge", choices=["openai", "lexical"], default="openai")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="fake judge latency a call")
    ap.add_argument("--in-flight", type=int, default=32, help="GROUNDWATCH_JUDGE__MAX_IN_FLIGHT")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=float, default=0.0, help="interactions/s; 0 = a backlog of --count")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of producing when --rate > 0")
    ap.add_argument("--count", type=int, default=5000, help="interactions when --rate is 0")
    ap.add_argument("--drain-timeout", type=float, default=600.0)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--profile", help="py-spy the worker into this file (.svg flamegraph / .json speedscope)")
    ap.add_argument("--profile-seconds", type=float, default=30.0)
    ap.add_argument("--env", action="append", default=[], help="extra GROUNDWATCH_X=Y for the worker")
    ap.add_argument(
        "--stage-times", action="store_true", help="when each topic's messages were written (after the run)"
    )
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument(
        "--tree", type=Path, default=REPO, help="the checkout the worker runs from (a baseline worktree)"
    )
    ap.add_argument(
        "--processes",
        type=int,
        default=1,
        help="the worker's judging processes (kafka.processes); 0: the setting left to its default (every "
        "core; a baseline checkout without the setting)",
    )
    args = ap.parse_args(argv)

    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    workdir = args.workdir or REPO / "build" / "bench" / f"stream-{time.strftime('%H%M%S')}"
    cfg = RunConfig(
        workdir=workdir,
        judge=args.judge,
        latency_ms=args.latency_ms,
        in_flight=args.in_flight,
        partitions=args.partitions,
        rate=args.rate,
        duration_s=args.duration,
        count=args.count,
        drain_timeout_s=args.drain_timeout,
        data=args.data,
        extra_env=dict(e.split("=", 1) for e in args.env),
        profile=args.profile,
        profile_seconds=args.profile_seconds,
        stage_times=args.stage_times,
        tree=args.tree.resolve(),
        processes=args.processes or None,
    )
    result = run(cfg, machine, log=lambda s: print(s, flush=True))
    machine.finish()
    fig = figures(result)
    print()
    print("\n".join(report(fig, cfg)))
    print()
    print(machine.describe())
    write_json(args.json, {"machine": machine.as_dict(), "config": result.config, "figures": fig})
    return 0


if __name__ == "__main__":
    sys.exit(main())
