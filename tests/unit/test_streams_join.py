"""JoinBuffer: one entry per interaction, complete when its parts are in, expired after the timeout."""

from __future__ import annotations

from schemas.interaction import Interaction
from schemas.results import Converted, NliResult, RefusalResult
from streams.acks import Ticket
from streams.join import JoinBuffer


def converted(iid: str) -> Converted:
    inter = Interaction(interaction_id=iid, question="Q?", answer="A.")
    return Converted(
        interaction=inter, question_sentences=["Q?"], answer_sentences=["A."], ground_truth_sentences=[]
    )


def nli(iid: str) -> NliResult:
    return NliResult(interaction_id=iid, pairs=[])


def refusal(iid: str) -> RefusalResult:
    return RefusalResult(interaction_id=iid, answer_refusal=False, ground_truth_refusal=None)


class _Ev:
    def ack(self) -> bool:
        return True

    message = None


def ticket(tp: str, offset: int) -> Ticket:
    return Ticket(tp=tp, offset=offset, event=_Ev())


def test_complete_in_any_order_and_carries_all_tickets() -> None:
    buf = JoinBuffer(need_refusal=True, timeout_s=10)
    assert buf.add("x", refusal("x"), ticket("refusals-0", 1), now=0) is None
    assert buf.add("x", nli("x"), ticket("nli-0", 7), now=1) is None
    entry = buf.add("x", converted("x"), ticket("converted-0", 3), now=2)
    assert entry is not None and entry.missing(True) == []
    assert [t.offset for t in entry.tickets] == [1, 7, 3]
    assert len(buf) == 0


def test_same_mode_needs_no_refusal_part() -> None:
    buf = JoinBuffer(need_refusal=False, timeout_s=10)
    buf.add("x", converted("x"), None, now=0)
    assert buf.add("x", nli("x"), None, now=0) is not None


def test_expiry_returns_incomplete_entries_once() -> None:
    buf = JoinBuffer(need_refusal=True, timeout_s=5)
    buf.add("old", converted("old"), None, now=0)
    buf.add("old", nli("old"), None, now=1)
    buf.add("new", converted("new"), None, now=4)
    assert buf.expired(now=4.9) == []
    gone = buf.expired(now=5.0)
    assert [e.interaction_id for e in gone] == ["old"] and gone[0].missing(True) == ["refusal"]
    assert buf.expired(now=5.0) == [] and len(buf) == 1


def test_redelivered_part_replaces_and_keeps_both_tickets() -> None:
    buf = JoinBuffer(need_refusal=True, timeout_s=5)
    buf.add("x", converted("x"), ticket("c", 1), now=0)
    buf.add("x", converted("x"), ticket("c", 9), now=0)
    buf.add("x", nli("x"), None, now=0)
    entry = buf.add("x", refusal("x"), None, now=0)
    assert entry is not None and [t.offset for t in entry.tickets] == [1, 9]


def test_forget_drops_entries_touching_revoked_partitions() -> None:
    buf = JoinBuffer(need_refusal=True, timeout_s=5)
    buf.add("a", converted("a"), ticket("c-0", 1), now=0)
    buf.add("b", converted("b"), ticket("c-1", 1), now=0)
    assert buf.forget({"c-0"}) == 1 and len(buf) == 1
