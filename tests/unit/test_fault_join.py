"""The join processor when things fail, and when two messages share an interaction_id: every part is acked
once its outcome is out (emitted, or dead-lettered), so the partition moves on; each message gets its own
verdict. Time is a ManualClock; the broker is a fake topic whose deliveries can fail, ClickHouse a fake
store whose query can fail: everything between them is the worker's own code."""

from __future__ import annotations

import asyncio

from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from tests.fixtures.join import TIMEOUT_S, Store, feed_all, parts, rig


def interaction(answer: str, iid: str = "same-id") -> Interaction:
    return Interaction(
        interaction_id=iid, question="Where is the key?", contexts=["By the door."], answer=answer
    )


# ---- no stuck partition ------------------------------------------------------------------------------


async def test_an_emit_that_keeps_failing_is_dead_lettered_and_its_partitions_move_on() -> None:
    r = rig()
    evaluations = r.topic(r.ctx.names.evaluations)
    evaluations.fail = True  # the broker refuses every Evaluation
    stuck = interaction("The key hangs by the door.", iid="stuck")
    await feed_all(r, parts(stuck, "entailed"))
    attempts = r.ctx.settings.kafka.deadletter_attempts
    assert evaluations.tried == attempts  # retried with backoff ...
    assert r.ctx.clock.slept == [1.0, 2.0, 4.0, 8.0]  # type: ignore[attr-defined]
    (letter,) = r.letters()  # ... then dead-lettered, with the interaction to replay
    assert (letter.stage, letter.interaction_id, letter.error_type) == ("join", "stuck", "ConnectionError")
    assert letter.original is not None and Interaction.model_validate_json(letter.original) == stuck
    names = r.ctx.names
    for topic in (names.converted, names.judged):
        assert r.committable(topic) == 1  # every part acked: the commit passes them
    # the next message of the same partitions goes through once the broker takes it
    evaluations.fail = False
    await feed_all(r, parts(interaction("It is in the shed.", iid="next"), "entailed"))
    assert [e.interaction_id for e in r.evaluations()] == ["next"]
    assert all(r.committable(t) == 2 for t in (names.converted, names.judged))
    assert r.join.acks.pending() == 0


async def test_an_expired_entry_is_emitted_when_clickhouse_cannot_say_whether_it_is_stored() -> None:
    store = Store()
    store.down = True
    r = rig(store)
    converted, _ = parts(interaction("The key hangs by the door."), "entailed")
    await r.feed(r.ctx.names.converted, converted)  # its judge result never comes
    assert r.committable(r.ctx.names.converted) == 0  # held while the join waits
    assert await r.expire(TIMEOUT_S - 1) == 0
    assert await r.expire(1) == 1
    assert store.asked == ["same-id"]
    (evaluation,) = r.evaluations()  # emitted anyway: a duplicate is harmless, a lost entry is not
    assert not evaluation.complete and evaluation.missing == ["nli", "refusal"]
    assert r.committable(r.ctx.names.converted) == 1


async def test_an_expired_entry_whose_emit_and_dead_letter_both_fail_is_given_up_not_held() -> None:
    r = rig()
    r.topic(r.ctx.names.evaluations).fail = True
    r.topic(r.ctx.names.deadletter).fail = True
    converted, _ = parts(interaction("The key hangs by the door."), "entailed")
    await r.feed(r.ctx.names.converted, converted)
    assert await r.expire(TIMEOUT_S) == 1
    attempts = r.ctx.settings.kafka.deadletter_attempts
    assert r.topic(r.ctx.names.evaluations).tried == attempts
    assert r.topic(r.ctx.names.deadletter).tried == attempts
    assert r.committable(r.ctx.names.converted) == 1  # given up with an ERROR log, acked


async def test_an_expired_entry_already_stored_complete_is_dropped_and_acked() -> None:
    store = Store(complete={"same-id"})
    r = rig(store)
    converted, _ = parts(interaction("The key hangs by the door."), "entailed")
    await r.feed(r.ctx.names.converted, converted)
    await r.expire(TIMEOUT_S)
    assert r.evaluations() == [] and r.letters() == []
    assert r.committable(r.ctx.names.converted) == 1
    # asked about this message's own row: its app, model and event time (another day is another row)
    inter = converted.interaction
    assert store.where == [(inter.app, inter.model, inter.timestamp)]


async def test_parts_without_their_converted_are_dead_lettered_after_the_timeout() -> None:
    r = rig()
    _, judged = parts(interaction("The key hangs by the door."), "entailed")
    await r.feed(r.ctx.names.judged, judged)
    await r.expire(TIMEOUT_S)
    (letter,) = r.letters()
    assert (letter.stage, letter.error_type) == ("join", "JoinTimeout")
    assert letter.source_topic == r.ctx.names.judged  # the part it holds
    assert r.committable(r.ctx.names.judged) == 1


async def test_a_judge_result_without_a_stage_is_emitted_at_once_naming_it_and_acked() -> None:
    """The judge processor dead-lettered a stage its judge gave up on and sent the other: nothing more
    will come, so the join emits the interaction now, incomplete, instead of after its timeout."""
    r = rig()
    converted, judged = parts(interaction("The key hangs by the door."), "entailed")
    await r.feed(r.ctx.names.converted, converted)
    await r.feed(r.ctx.names.judged, judged.model_copy(update={"nli": None}))
    (evaluation,) = r.evaluations()
    assert not evaluation.complete and evaluation.missing == ["nli"]
    assert evaluation.answer_refusal is False and evaluation.context_entailment is None
    assert r.committable(r.ctx.names.converted) == 1 and r.committable(r.ctx.names.judged) == 1
    assert r.clock.monotonic() == 0 and len(r.join.buffer) == 0


async def test_the_expiry_loop_waits_on_the_injected_clock() -> None:
    """The loop's ticks are waits on the join's clock: a ManualClock's waits pass at once, so an entry
    comes out incomplete after the join timeout of clock time, with no wall time spent."""
    r = rig()
    converted, _ = parts(interaction("The key hangs by the door."), "entailed")
    await r.feed(r.ctx.names.converted, converted)
    loop = asyncio.create_task(r.join.expire_loop())
    try:
        for _ in range(1000):
            await asyncio.sleep(0)
            if r.evaluations():
                break
    finally:
        loop.cancel()
    await r.join.pool.drain()
    (evaluation,) = r.evaluations()
    assert not evaluation.complete and evaluation.missing == ["nli", "refusal"]
    assert r.clock.monotonic() >= TIMEOUT_S and set(r.clock.slept) == {1.0}  # a quarter of it, at most 1 s
    assert r.committable(r.ctx.names.converted) == 1


# ---- one message, one verdict ------------------------------------------------------------------------


def answers_match_their_statements(evaluations: list[Evaluation]) -> None:
    for evaluation in evaluations:
        assert evaluation.interaction is not None
        statements = [s.statement for p in evaluation.pairs for h in p.hypotheses for s in h.statements]
        assert statements == [evaluation.interaction.answer], (evaluation.interaction.answer, statements)


async def test_two_messages_with_one_id_back_to_back_each_get_their_own_verdict() -> None:
    x = parts(interaction("The key hangs by the door."), "entailed")
    y = parts(interaction("The key is under the mat."), "contradicted")
    for first, second in ((x, y), (y, x)):
        r = rig()
        await feed_all(r, first, second)  # both Converted, then both judge results
        evaluations = r.evaluations()
        assert len(evaluations) == 2 and all(e.complete for e in evaluations)
        answers_match_their_statements(evaluations)
        scores = {e.interaction.answer: e.context_entailment for e in evaluations if e.interaction}
        assert scores == {"The key hangs by the door.": 1.0, "The key is under the mat.": 0.0}
        assert r.join.acks.pending() == 0 and len(r.join.buffer) == 0


async def test_two_messages_with_one_id_interleaved_in_reverse_never_mix() -> None:
    x = parts(interaction("The key hangs by the door."), "entailed")
    y = parts(interaction("The key is under the mat."), "contradicted")
    r = rig()
    names = r.ctx.names
    await r.feed(names.judged, y[1])
    await r.feed(names.converted, x[0])
    await r.feed(names.converted, y[0])  # y is complete now
    (first,) = r.evaluations()
    assert first.interaction is not None and first.interaction.answer == "The key is under the mat."
    await r.feed(names.judged, x[1])
    answers_match_their_statements(r.evaluations())
    assert len(r.evaluations()) == 2
