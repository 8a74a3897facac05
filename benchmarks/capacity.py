"""Size a groundwatch deployment from a traffic rate (the worked example of docs/capacity.md).

    python benchmarks/capacity.py [--rates 100 1000 10000] [--cpu-ms 5.0] [--calls 0.26] [--tokens 546]
        [--cost 0.0001205] [--call-latency-s 1.5] [--eval-bytes 215] [--statement-rows 1.45]
        [--statement-bytes 68] [--sampling 1.0]

Arithmetic only: every input is a measurement docs/capacity.md gives with its command (defaults: the
figures measured there), or an assumption it names (the judge's latency per call, the share of a core a
worker may use). Prints, per rate, the workers, partitions, judge calls in flight, judge requests and
tokens per minute, ClickHouse rows and bytes per day and over the retention, and the judge's cost per day.
"""

from __future__ import annotations

import argparse
import math
import sys

DAY_S = 86_400


def partitions_for(workers: int) -> int:
    """Twice the workers (room to scale out without re-partitioning), at least 4, a power of two."""
    return max(4, 2 ** math.ceil(math.log2(2 * workers)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[100, 1000, 10000], help="interactions/s")
    ap.add_argument("--cpu-ms", type=float, default=2.0, help="worker CPU per interaction (ms)")
    ap.add_argument("--core-share", type=float, default=0.8, help="share of one core a worker may use")
    ap.add_argument("--calls", type=float, default=0.26, help="judge calls per interaction")
    ap.add_argument("--tokens", type=float, default=546, help="judge tokens (in + out) per interaction")
    ap.add_argument("--cost", type=float, default=0.0001205, help="judge USD per interaction")
    ap.add_argument("--call-latency-s", type=float, default=1.5, help="judge latency per call (s)")
    ap.add_argument("--eval-bytes", type=float, default=215, help="evaluations bytes on disk per row")
    ap.add_argument(
        "--statement-rows", type=float, default=1.45, help="statement rows per judged interaction"
    )
    ap.add_argument(
        "--statement-bytes", type=float, default=68, help="statement bytes on disk per judged interaction"
    )
    ap.add_argument("--ttl-days", type=int, default=90, help="retention (clickhouse.ttl_days)")
    ap.add_argument("--sampling", type=float, default=1.0, help="share of interactions judged")
    args = ap.parse_args(argv)
    per_worker = args.core_share / (args.cpu_ms / 1000)
    print(
        f"a worker: {per_worker:.0f} interactions/s ({args.cpu_ms} ms of CPU each, "
        f"{args.core_share} of a core); judged share {args.sampling}"
    )
    print()
    print(
        "| interactions/s | workers | partitions | judge calls in flight (per worker) | judge requests/min "
        "| judge tokens/min | ClickHouse rows/day | GB/day | TB over the retention | judge USD/day |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rate in args.rates:
        workers = max(1, math.ceil(rate / per_worker))
        judged = rate * args.sampling
        in_flight = judged * args.calls * args.call_latency_s
        per_day = rate * DAY_S
        # an interaction the sampling skips is stored unjudged: its evaluations row, no statements
        rows_day = per_day * (1 + args.statement_rows * args.sampling)
        gb_day = per_day * (args.eval_bytes + args.statement_bytes * args.sampling) / 1e9
        print(
            f"| {rate:,.0f} | {workers} | {partitions_for(workers)} "
            f"| {in_flight:,.0f} ({in_flight / workers:,.0f}) "
            f"| {judged * args.calls * 60:,.0f} | {judged * args.tokens * 60:,.0f} | {rows_day:,.0f} "
            f"| {gb_day:,.1f} | {gb_day * args.ttl_days / 1000:,.2f} | {judged * DAY_S * args.cost:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
