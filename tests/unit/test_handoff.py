"""The fused processor's Evaluations handed to this worker's sink in memory (streams.handoff): a message
that comes back is acked once its row is written, never before; what is not held is read as any other."""

from __future__ import annotations

from faust.types import TP

from streams.handoff import Handoff


def test_a_message_that_comes_back_after_its_row_is_written_is_acked_at_once() -> None:
    handoff, acked = Handoff(10), []
    written = handoff.sent(("ev", 0, 7))
    written()
    assert handoff.claim(("ev", 0, 7), lambda: acked.append(7)) and acked == [7]
    assert len(handoff) == 0 and handoff.claimed == 1


def test_a_message_that_comes_back_before_its_row_is_written_waits_for_the_write() -> None:
    handoff, acked = Handoff(10), []
    written = handoff.sent(("ev", 1, 3))
    assert handoff.claim(("ev", 1, 3), lambda: acked.append(3))
    assert acked == []  # not written yet: a crash now leaves the message unacked
    written()
    assert acked == [3] and len(handoff) == 0


def test_a_message_made_elsewhere_is_read_by_the_sink_itself() -> None:
    handoff = Handoff(10)
    handoff.sent(("ev", 0, 1))
    assert not handoff.claim(("ev", 0, 2), lambda: None)  # another offset
    assert not handoff.claim(("other", 0, 1), lambda: None)  # another topic


def test_partitions_lost_in_a_rebalance_are_forgotten() -> None:
    handoff, acked = Handoff(10), []
    handoff.sent(("ev", 0, 1))
    late = handoff.sent(("ev", 1, 1))
    assert handoff.claim(("ev", 1, 1), lambda: acked.append(1))
    assert handoff.forget([TP("ev", 1)]) == 1
    late()  # the row is written after the partition moved: nothing acks a message now someone else's
    assert acked == [] and not handoff.claim(("ev", 1, 1), lambda: None)
    assert handoff.claim(("ev", 0, 1), lambda: None)  # the partition kept


def test_past_the_limit_the_oldest_unclaimed_go_never_one_waiting_for_its_ack() -> None:
    handoff, acked = Handoff(2), []
    first = handoff.sent(("ev", 0, 0))
    assert handoff.claim(("ev", 0, 0), lambda: acked.append(0))  # claimed: its ack waits for the write
    handoff.sent(("ev", 0, 1))
    handoff.sent(("ev", 0, 2))  # over the limit: offset 1 goes (its message is read again), not 0
    assert not handoff.claim(("ev", 0, 1), lambda: None)
    first()
    assert acked == [0]
    assert handoff.claim(("ev", 0, 2), lambda: None)
