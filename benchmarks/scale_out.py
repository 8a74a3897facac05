"""Scale-out: one worker vs two workers in one consumer group, the 300 ms judge, each interaction once.

    python benchmarks/scale_out.py [--latency-ms 300] [--count 1500] [--partitions 4]
        [--json build/bench/scale_out.json]

Two runs through the real Tansu broker (benchmarks/streamkit.py), each with the fake OpenAI-compatible
judge answering after ``--latency-ms`` with 32 calls in flight per worker: one worker with a backlog of
``--count`` interactions, then two workers (same topic prefix, same consumer group, ``--partitions``
partitions per topic, so faust gives each member the same partition numbers of every topic and the
join stays local) with a backlog of twice that.

chDB is embedded: one engine path per process, one process per path, so two workers cannot share one.
Each worker writes to its own chDB path, and the evaluations are counted over the union of both paths
(read after the workers stopped); with a ClickHouse server both would write to the same tables (the
ReplacingMergeTree on interaction_id makes a duplicate write harmless there). "Evaluated once" is
checked twice: distinct interaction ids vs rows over both paths, and distinct keys vs messages on the
evaluations topic. Windows are per path here (each worker aggregates the rows it holds); with a
shared server they are computed from all rows.
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

from benchmarks.machine import Machine, write_json  # noqa: E402
from benchmarks.stream_throughput import report  # noqa: E402
from benchmarks.streamkit import DEFAULT_DATA, RunConfig, figures, run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency-ms", type=float, default=300.0)
    ap.add_argument("--in-flight", type=int, default=32)
    ap.add_argument("--count", type=int, default=1500, help="backlog for one worker (two get twice it)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    base = REPO / "build" / "bench" / f"scale-{time.strftime('%H%M%S')}"
    out: dict[str, Any] = {}
    for workers in (1, 2):
        cfg = RunConfig(
            workdir=base / f"w{workers}",
            latency_ms=args.latency_ms,
            in_flight=args.in_flight,
            partitions=args.partitions,
            workers=workers,
            count=args.count * workers,
            data=args.data,
        )
        print(f"\n== {workers} worker(s), backlog {cfg.count} ==", flush=True)
        result = run(cfg, machine, log=lambda s: print(s, flush=True))
        fig = figures(result)
        print("\n".join(report(fig, cfg)))
        out[f"workers_{workers}"] = fig
    machine.finish()

    one, two = out["workers_1"], out["workers_2"]
    s1 = one.get("throughput_steady_judge") or one["throughput_overall"]
    s2 = two.get("throughput_steady_judge") or two["throughput_overall"]
    print("\n== scale-out ==")
    if "bound" in one and "bound" in two:
        print(
            f"share of the in-flight bound: 1 worker {100 * one['fraction_of_bound']:.1f}% of "
            f"{one['bound']:.1f}/s, 2 workers {100 * two['fraction_of_bound']:.1f}% of {two['bound']:.1f}/s"
        )
    print(
        f"steady: 1 worker {s1:.1f}/s, 2 workers {s2:.1f}/s = {s2 / s1:.2f}x; end to end "
        f"{one['throughput_overall']:.1f}/s vs {two['throughput_overall']:.1f}/s = "
        f"{two['throughput_overall'] / one['throughput_overall']:.2f}x"
    )
    print(
        f"2 workers: produced {two['produced']}; ClickHouse (union of both chDB paths): "
        f"{two['rows_distinct']} distinct interactions in {two['rows_total']} rows "
        f"(per worker {two['rows_per_worker']}); evaluations topic: {two['topic_distinct']} distinct keys in "
        f"{two['topic_total']} messages"
    )
    once = (
        two["rows_distinct"] == two["produced"] == two["rows_total"]
        and two["topic_total"] == two["topic_distinct"] == two["produced"]
    )
    overlap = sum(two["distinct_per_worker"]) - two["rows_distinct"]
    print(
        f"each interaction evaluated once: {'yes' if once else 'NO'} "
        f"(interactions in both workers' tables: {overlap})"
    )
    out["ratio_steady"] = s2 / s1
    out["ratio_end_to_end"] = two["throughput_overall"] / one["throughput_overall"]
    out["evaluated_once"] = once
    print()
    print(machine.describe())
    write_json(args.json, {"machine": machine.as_dict(), **out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
