"""Inserts paced by what they cost (streams.clickhouse.batch.RowBatch, clickhouse.insert_share): after a
slow insert a batch that is not full waits, a full batch never does, and the wait is bounded."""

from __future__ import annotations

from pipeline.clock import ManualClock
from streams.clickhouse.batch import MAX_PACE_S, RowBatch


def test_after_an_insert_a_batch_waits_so_inserts_take_their_share_of_the_time() -> None:
    clock = ManualClock()
    batch: RowBatch[int] = RowBatch(max_rows=100, max_seconds=0.25, clock=clock, insert_share=0.1)
    batch.add(1)
    clock.advance(0.25)
    assert batch.due()  # no insert yet: batch_seconds alone
    batch.take()
    batch.wrote(0.2)  # that insert took 0.2 s: the next waits 0.2 x 0.9 / 0.1 = 1.8 s
    batch.add(2)
    clock.advance(1.0)
    assert not batch.due()
    clock.advance(0.8)
    assert batch.due()


def test_a_full_batch_is_written_whatever_the_pace() -> None:
    clock = ManualClock()
    batch: RowBatch[int] = RowBatch(max_rows=2, max_seconds=0.25, clock=clock, insert_share=0.1)
    batch.wrote(1.0)
    assert not batch.add(1)
    assert batch.add(2)  # full: the caller flushes now


def test_the_wait_is_bounded_and_a_share_of_one_is_batch_seconds_alone() -> None:
    clock = ManualClock()
    paced: RowBatch[int] = RowBatch(max_rows=100, max_seconds=0.25, clock=clock, insert_share=0.1)
    paced.wrote(60.0)  # an insert that hung a minute (an outage)
    paced.add(1)
    clock.advance(MAX_PACE_S)
    assert paced.due()
    unpaced: RowBatch[int] = RowBatch(max_rows=100, max_seconds=0.25, clock=clock, insert_share=1.0)
    unpaced.wrote(5.0)
    unpaced.add(1)
    clock.advance(0.25)
    assert unpaced.due()
