"""OrderedAcks: faust events are acked only as a finished prefix of each partition, in offset order."""

from __future__ import annotations

from faust.types import TP

from streams.acks import OrderedAcks
from streams.testing import Event, Message


def events(tp: str, offsets: range, log: list[tuple[str, int]]) -> list[Event]:
    return [Event(None, message=Message(tp, 0, o), acked=log) for o in offsets]


def test_out_of_order_finish_acks_in_offset_order() -> None:
    log: list[tuple[str, int]] = []
    acks = OrderedAcks()
    tickets = [acks.track(e) for e in events("p0", range(10, 14), log)]
    assert acks.done(tickets[2]) == 0 and acks.done(tickets[1]) == 0
    assert log == []  # offset 10 unfinished: nothing may be acked (faust would commit past it)
    assert acks.done(tickets[0]) == 3
    assert log == [("p0", 10), ("p0", 11), ("p0", 12)]
    assert acks.pending() == 1
    acks.done(tickets[3])
    assert log[-1] == ("p0", 13) and acks.pending() == 0


def test_partitions_are_independent() -> None:
    log: list[tuple[str, int]] = []
    acks = OrderedAcks()
    a = [acks.track(e) for e in events("a", range(0, 2), log)]
    b = [acks.track(e) for e in events("b", range(5, 7), log)]
    acks.done(b[0])
    acks.done(a[1])
    assert log == [("b", 5)]
    acks.done(a[0])
    assert log == [("b", 5), ("a", 0), ("a", 1)]


def test_forget_drops_revoked_partitions_without_acking() -> None:
    log: list[tuple[str, int]] = []
    acks = OrderedAcks()
    t = [acks.track(e) for e in events("a", range(3), log)]
    acks.track(Event(None, message=Message("b", 0, 0), acked=log))
    assert acks.forget([TP("a", 0)]) == 3
    acks.done(t[0])
    assert log == [] and acks.pending() == 1
