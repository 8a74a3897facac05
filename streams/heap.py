"""The worker's garbage-collection policy, set once its start-up is done (``GroundwatchWorker``).

Python's cyclic collector runs after every ``threshold[0]`` net allocations of container objects (700
by default), and every 100th run of it is a full collection that walks every object alive. A worker's
start-up leaves a few hundred thousand of them (faust, aiokafka, pydantic's schemas, the sentence
splitter's parameters, chDB's client), and each interaction allocates thousands (the judge's JSON answer
with its token log-probabilities, the decoded messages): with the defaults, full collections that found
almost nothing to free took ~40% of the CPU of the stages' own work (docs/performance.md, "Throughput and
CPU").

So, once started: what start-up left is collected once and moved out of the collector's sight
(``gc.freeze``: it is never walked again, and never freed, which it would not be anyway), and the first
generation is collected after ``GEN0_THRESHOLD`` net allocations instead of 700. Garbage without cycles
is still freed at once (reference counting); garbage in cycles waits for the collection of its
generation, which comes about 14 times less often than with the defaults.
"""

from __future__ import annotations

import gc

#: net container allocations between two collections of the youngest generation (Python's default: 700)
GEN0_THRESHOLD = 10_000


def settle_heap() -> int:
    """Collect and freeze what start-up left, and collect the young generation less often; return how
    many objects are frozen."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
    return gc.get_freeze_count()
