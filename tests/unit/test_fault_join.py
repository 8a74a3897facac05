"""The join processor when things fail, and when two messages share an interaction_id: every part is acked
once its outcome is out (emitted, or dead-lettered), so the partition moves on; each message gets its own
verdict. Time is a ManualClock; the broker is a fake topic whose deliveries can fail, ClickHouse a fake
store whose query can fail: everything between them is the worker's own code."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from pipeline.clock import ManualClock
from schemas.deadletter import DeadLetter
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction, interaction_digest
from schemas.results import (
    Converted,
    HypothesisResult,
    JudgeResult,
    NliResult,
    PairResult,
    RefusalResult,
    StatementVerdict,
)
from streams.acks import OrderedAcks
from streams.context import StreamContext, new_context
from streams.processors.join import JoinProcessor
from streams.testing import Event, Topic
from tests.settings_factory import make_settings

TIMEOUT_S = 10.0


class Store:
    """ClickHouse as the join asks it: ``has_complete``, unreachable while ``down``."""

    def __init__(self, complete: set[str] | None = None) -> None:
        self.down = False
        self.complete = complete or set()
        self.asked: list[str] = []
        self.where: list[Any] = []

    async def has_complete(self, interaction_id: str, where: Any = None) -> bool:
        self.asked.append(interaction_id)
        self.where.append(where)
        if self.down:
            raise ConnectionError("clickhouse unreachable")
        return interaction_id in self.complete


@dataclass
class Rig:
    ctx: StreamContext
    join: JoinProcessor
    clock: ManualClock
    store: Store
    acked: list[tuple[str, int]]
    offsets: dict[str, int] = field(default_factory=dict)

    def topic(self, name: str) -> Topic:
        topic = self.ctx.topics[name]
        assert isinstance(topic, Topic)
        return topic

    async def feed(self, topic: str, part: Any) -> None:
        offset = self.offsets[topic] = self.offsets.get(topic, -1) + 1
        event = Event.at(topic, offset, part.model_dump_json().encode(), self.acked)
        await self.join.handle(event, self.join.acks.track(event))
        await self.join.pool.drain()

    async def expire(self, seconds: float) -> int:
        self.clock.advance(seconds)
        due = await self.join.expire_due()
        await self.join.pool.drain()
        return due

    def evaluations(self) -> list[Evaluation]:
        return [Evaluation.model_validate_json(v) for v in self.topic(self.ctx.names.evaluations).sent]

    def letters(self) -> list[DeadLetter]:
        return [DeadLetter.model_validate_json(v) for v in self.topic(self.ctx.names.deadletter).sent]

    def committable(self, topic: str) -> int:
        """The offset a commit of ``topic``'s partition may reach: one past its acked prefix."""
        done = {o for t, o in self.acked if t == topic}
        n = 0
        while n in done:
            n += 1
        return n


def rig(store: Store | None = None) -> Rig:
    settings = make_settings(kafka={"join_timeout_s": TIMEOUT_S}, judge={"kind": "lexical"})
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    for name in ctx.names.all():
        ctx.topics[name] = Topic()
    ctx.clock = ManualClock()
    store = store or Store()

    async def ready() -> Any:
        return resources

    resources = SimpleNamespace(wait_ready=ready, store_open=store, relevance=None, arguments=None)
    clock = ManualClock()
    join = JoinProcessor(ctx, resources, clock=clock)  # type: ignore[arg-type]
    join.acks = OrderedAcks()
    return Rig(ctx, join, clock, store, [])


def interaction(answer: str, iid: str = "same-id") -> Interaction:
    return Interaction(
        interaction_id=iid, question="Where is the key?", contexts=["By the door."], answer=answer
    )


def parts(inter: Interaction, verdict: str) -> tuple[Converted, JudgeResult]:
    """The two parts of one message, each statement being its own answer with ``verdict``."""
    digest = interaction_digest(inter)
    score = 1.0 if verdict == "entailed" else 0.0
    statement = StatementVerdict(statement=inter.answer, verdict=verdict, score=score)  # type: ignore[arg-type]
    pair = PairResult(
        pair="context_answer",
        hypotheses=[HypothesisResult(hypothesis=inter.answer, statements=[statement], score=score)],
        score=score,
    )
    return (
        Converted(
            interaction=inter,
            digest=digest,
            question_sentences=[inter.question],
            answer_sentences=[inter.answer],
            ground_truth_sentences=[],
        ),
        JudgeResult(
            interaction_id=inter.interaction_id,
            digest=digest,
            nli=NliResult(interaction_id=inter.interaction_id, digest=digest, pairs=[pair]),
            refusal=RefusalResult(
                interaction_id=inter.interaction_id,
                digest=digest,
                answer_refusal=False,
                ground_truth_refusal=None,
            ),
        ),
    )


async def feed_all(r: Rig, *messages: tuple[Converted, JudgeResult]) -> None:
    names = r.ctx.names
    for index, topic in enumerate([names.converted, names.judged]):
        for message in messages:
            await r.feed(topic, message[index])


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
