"""The worker's garbage-collection policy (streams.heap): what it leaves the collector to do."""

from __future__ import annotations

import gc

from streams.heap import GEN0_THRESHOLD, settle_heap


def test_settling_freezes_what_is_alive_and_collects_the_young_generation_less_often() -> None:
    before = gc.get_threshold()
    try:
        alive = [[i] for i in range(1000)]  # alive when the heap settles (lists are always tracked)
        frozen = settle_heap()
        assert frozen == gc.get_freeze_count() >= len(alive)
        assert gc.get_threshold() == (GEN0_THRESHOLD, before[1], before[2])
        tracked = {id(o) for o in gc.get_objects()}  # what the collector still walks
        assert not any(id(o) in tracked for o in alive)
        made_after = [[i] for i in range(10)]
        assert any(o is made_after[0] for o in gc.get_objects())  # later objects are still collected
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # garbage in cycles made after settling is still freed
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
