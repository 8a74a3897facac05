"""Judge-call latencies as counts per fixed, log-spaced bucket: a histogram that adds up.

A window stores how many of its judge calls fell in each bucket
(``window_aggregates.judge_latency_histogram``).
Histograms of windows add element-wise, so an hour or a day of windows gets its quantiles from the sums
(within one bucket's width, 20 %) without reading a single interaction.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

#: the upper edge of each bucket but the last (which takes everything above): 1 ms x 1.2^i up to ~10 min
LATENCY_BUCKET_GROWTH = 1.2
LATENCY_BUCKET_EDGES_MS: tuple[float, ...] = tuple(
    round(LATENCY_BUCKET_GROWTH**i, 6) for i in range(int(math.log(600_000) / math.log(1.2)) + 2)
)
LATENCY_BUCKETS = len(LATENCY_BUCKET_EDGES_MS) + 1


def bucket_of(latency_ms: float) -> int:
    """The index of the bucket holding ``latency_ms`` (bucket i covers (edge[i-1], edge[i]])."""
    return bisect.bisect_left(LATENCY_BUCKET_EDGES_MS, max(0.0, latency_ms))


def histogram(latencies_ms: Iterable[float]) -> list[int]:
    """Counts per bucket (always LATENCY_BUCKETS long)."""
    counts = [0] * LATENCY_BUCKETS
    for value in latencies_ms:
        counts[bucket_of(value)] += 1
    return counts


def add_histograms(histograms: Iterable[Sequence[int]]) -> list[int]:
    """Element-wise sum; an empty histogram (a stored window without one) adds nothing."""
    total = [0] * LATENCY_BUCKETS
    for h in histograms:
        for i, count in enumerate(h[:LATENCY_BUCKETS]):
            total[i] += int(count)
    return total


def quantile(counts: Sequence[int], q: float) -> float | None:
    """The q-quantile (0 <= q <= 1) of a histogram, interpolated geometrically inside its bucket; None
    when the histogram is empty."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    n = sum(counts)
    if n == 0:
        return None
    rank = q * n
    seen = 0
    for i, count in enumerate(counts):
        if count and seen + count >= rank:
            lo = LATENCY_BUCKET_EDGES_MS[i - 1] if i > 0 else 0.0
            hi = (
                LATENCY_BUCKET_EDGES_MS[i] if i < len(LATENCY_BUCKET_EDGES_MS) else lo * LATENCY_BUCKET_GROWTH
            )
            share = (rank - seen) / count
            if lo <= 0.0:
                return hi * share
            return float(lo * (hi / lo) ** share)
        seen += count
    return LATENCY_BUCKET_EDGES_MS[-1]
