"""JoinBuffer: one entry per interaction, complete when its parts are in, expired after the timeout."""

from __future__ import annotations

import pytest

from schemas.results import Converted, JudgeResult, NliResult, RefusalResult
from streams.acks import Ticket
from streams.join import JoinBuffer
from tests.fixtures import messages
from tests.settings_factory import make_settings


def converted(iid: str) -> Converted:
    return messages.converted(messages.interaction(interaction_id=iid, question="Q?", answer="A."))


def judged(iid: str, *, nli: bool = True, refusal: bool = True) -> JudgeResult:
    """The judge processor's result; a stage it could not finish is None."""
    return JudgeResult(
        interaction_id=iid,
        nli=NliResult(interaction_id=iid, pairs=[]) if nli else None,
        refusal=RefusalResult(interaction_id=iid, answer_refusal=False, ground_truth_refusal=None)
        if refusal
        else None,
    )


class _Ev:
    def ack(self) -> bool:
        return True

    message = None


def ticket(tp: str, offset: int) -> Ticket:
    return Ticket(tp=tp, offset=offset, event=_Ev())


def test_complete_in_any_order_and_carries_all_tickets() -> None:
    buf = JoinBuffer(timeout_s=10)
    assert buf.add(judged("x"), ticket("judged-0", 7), now=1) is None
    entry = buf.add(converted("x"), ticket("converted-0", 3), now=2)
    assert entry is not None and entry.complete and entry.missing(True) == []
    assert [t.offset for t in entry.tickets] == [7, 3]
    assert len(buf) == 0


def test_a_stage_the_judge_processor_could_not_finish_is_missing_but_the_entry_goes_out_at_once() -> None:
    buf = JoinBuffer(timeout_s=10)
    buf.add(converted("x"), None, now=0)
    entry = buf.add(judged("x", nli=False), None, now=0)
    assert entry is not None and entry.missing(True) == ["nli"] and entry.refusal is not None
    buf.add(converted("y"), None, now=0)
    both = buf.add(judged("y", nli=False, refusal=False), None, now=0)
    assert both is not None and both.missing(True) == ["nli", "refusal"]


def test_same_mode_needs_no_refusal_result() -> None:
    buf = JoinBuffer(timeout_s=10)
    buf.add(converted("x"), None, now=0)
    entry = buf.add(judged("x", refusal=False), None, now=0)
    assert entry is not None and entry.missing(False) == [] and entry.missing(True) == ["refusal"]


def test_expiry_returns_incomplete_entries_once() -> None:
    buf = JoinBuffer(timeout_s=5)
    buf.add(converted("old"), None, now=0)
    buf.add(converted("new"), None, now=4)
    assert buf.expired(now=4.9) == []
    gone = buf.expired(now=5.0)
    assert [e.interaction_id for e in gone] == ["old"] and gone[0].missing(True) == ["nli", "refusal"]
    assert buf.expired(now=5.0) == [] and len(buf) == 1


def test_redelivered_part_replaces_and_keeps_both_tickets() -> None:
    buf = JoinBuffer(timeout_s=5)
    buf.add(converted("x"), ticket("c", 1), now=0)
    buf.add(converted("x"), ticket("c", 9), now=0)
    entry = buf.add(judged("x"), None, now=0)
    assert entry is not None and [t.offset for t in entry.tickets] == [1, 9]


def test_forget_drops_entries_touching_revoked_partitions() -> None:
    buf = JoinBuffer(timeout_s=5)
    buf.add(converted("a"), ticket("c-0", 1), now=0)
    buf.add(converted("b"), ticket("c-1", 1), now=0)
    assert buf.forget({"c-0"}) == 1 and len(buf) == 1


def test_a_late_part_after_the_timeout_rebuilds_the_complete_entry() -> None:
    buf = JoinBuffer(timeout_s=5)
    buf.add(converted("x"), ticket("c", 1), now=0)
    gone = buf.expired(now=5)
    assert [e.missing(True) for e in gone] == [["nli", "refusal"]]  # emitted incomplete
    assert len(buf) == 0 and buf.late() == 1
    late = buf.add(judged("x"), ticket("j", 4), now=60)
    assert late is not None and late.missing(True) == []  # emitted again, complete
    assert late.converted is not None and late.refusal is not None
    assert [t.offset for t in late.tickets] == [4]  # only the late part is left to ack
    assert buf.late() == 0 and len(buf) == 0


def test_a_late_converted_after_its_judge_result_expired_completes_it() -> None:
    buf = JoinBuffer(timeout_s=5)
    buf.add(judged("x"), None, now=0)
    (gone,) = buf.expired(now=5)
    assert gone.converted is None and buf.late() == 1  # dead-lettered ("without converted"), parts kept
    done = buf.add(converted("x"), None, now=9)
    assert done is not None and done.missing(True) == [] and buf.late() == 0


def test_the_late_parts_kept_are_bounded_lru() -> None:
    buf = JoinBuffer(timeout_s=1, keep_late=2)
    for i, iid in enumerate(["a", "b", "c"]):
        buf.add(converted(iid), None, now=i)
    buf.expired(now=10)
    assert buf.late() == 2
    assert buf.add(judged("a"), None, now=11) is None  # the oldest was dropped: a new entry waits
    assert buf.add(judged("c"), None, now=11) is not None


def test_join_timeout_is_derived_from_the_judge_and_a_short_one_is_warned_about(caplog) -> None:
    import logging

    from schemas.settings import JudgeSettings, KafkaSettings
    from streams.join import join_timeout

    assert join_timeout(make_settings(judge=JudgeSettings(kind="lexical"))) == 120.0
    # openai defaults: 5 attempts x 60 s + backoffs 0.5 + 1 + 2 + 4, plus 30 s
    assert join_timeout(make_settings(judge=JudgeSettings(kind="openai"))) == pytest.approx(337.5)
    assert join_timeout(make_settings(judge=JudgeSettings(kind="local", local_timeout_s=900))) == 930.0
    short = make_settings(judge=JudgeSettings(kind="openai"), kafka=KafkaSettings(join_timeout_s=4))
    with caplog.at_level(logging.WARNING):
        assert join_timeout(short) == 4
    assert "under the openai judge's worst case" in caplog.text
