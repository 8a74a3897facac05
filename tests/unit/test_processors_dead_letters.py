"""Every processor, fed a bad message or hit by a failing judge, dead-letters it with its stage, the
reason and the original message, through the same runner and ``StreamContext.dead_letter``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.judges.lexical import LexicalJudge
from pipeline.privacy.mask import Masker, PrivacyGuard
from pipeline.refusal import RefusalClassifier
from schemas.deadletter import DeadLetter
from schemas.errors import JudgeError
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.results import JudgeResult
from schemas.settings import PrivacySettings
from streams.processors.base import Processor
from streams.processors.convert import ConvertProcessor
from streams.processors.evaluate import EvaluateProcessor
from streams.processors.judge import JudgeProcessor
from streams.testing import Event
from tests.fixtures.processors import CONVERTED, INTERACTION, context, resources, run


def keyed(value: bytes) -> Event:
    return Event(value, key=b"i1")


class FailingJudge:
    async def pronouns(self, *args: Any, **kwargs: Any) -> Any:
        raise JudgeError("HTTP 401: bad key")


GOOD = {"convert": INTERACTION, "nli": CONVERTED, "evaluate": INTERACTION}


@pytest.mark.parametrize(
    ("kind", "failed_stages"),
    [
        (ConvertProcessor, ["convert"]),
        (JudgeProcessor, ["nli", "refusal"]),  # both of its stages failed: one dead letter each
        (EvaluateProcessor, ["refusal"]),
    ],
)
async def test_bad_input_and_judge_failures_are_dead_lettered(
    kind: type[Processor[Any]], failed_stages: list[str]
) -> None:
    ctx, dead = context()
    processor = kind(ctx, resources())
    good = keyed(GOOD[processor.stage].model_dump_json().encode())
    bad = keyed(b'{"interaction_id": "i2", "question": 7}')
    await run(processor, [bad, good])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [letter.stage for letter in letters] == ["validate", *failed_stages]
    assert letters[0].payload == bad.value.decode() and letters[0].source_topic == processor.source_topic
    for judged in letters[1:]:
        assert judged.interaction_id == "i1" and judged.original is not None
        assert Interaction.model_validate_json(judged.original) == INTERACTION  # replayable
    assert len({letter.dead_letter_id for letter in letters}) == len(letters)
    assert good.acked and bad.acked


class BrokenDetector:
    def detect(self, text: str) -> list[Any]:
        raise RuntimeError("detector down")


@pytest.mark.parametrize("kind", [ConvertProcessor, EvaluateProcessor])
@pytest.mark.parametrize("mode", ["judge", "all"])
async def test_a_failing_detector_dead_letters_under_stage_privacy(
    kind: type[Processor[Any]], mode: str
) -> None:
    """Masking where interactions enter judging: a detector failure is never a judge call with the
    texts unmasked; the interaction is dead-lettered (stage privacy) and can be replayed."""
    ctx, dead = context()
    res = resources()
    res.privacy = PrivacyGuard(PrivacySettings(mode=mode), Masker(BrokenDetector()))  # type: ignore[arg-type]
    processor = kind(ctx, res)
    event = keyed(INTERACTION.model_dump_json().encode())
    await run(processor, [event])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [(d.stage, d.interaction_id) for d in letters] == [("privacy", "i1")]
    assert letters[0].original is not None and event.acked
    assert not ctx.topics[ctx.names.converted].sent and not ctx.topics[ctx.names.evaluations].sent


@pytest.mark.parametrize(
    ("kind", "failed_stage"), [(ConvertProcessor, "convert"), (EvaluateProcessor, "refusal")]
)
async def test_in_mode_all_a_judge_failure_dead_letters_the_masked_interaction(
    kind: type[Processor[Any]], failed_stage: str
) -> None:
    from pipeline.privacy.detect import PresidioDetector

    ctx, dead = context()
    res = resources()
    res.privacy = PrivacyGuard(PrivacySettings(mode="all"), Masker(PresidioDetector(PrivacySettings())))
    processor = kind(ctx, res)
    planted = INTERACTION.model_copy(update={"answer": f"{INTERACTION.answer} Ask ann.lee@gmail.com."})
    await run(processor, [keyed(planted.model_dump_json().encode())])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [d.stage for d in letters] == [failed_stage]
    assert "ann.lee@gmail.com" not in dead.sent[0].decode()  # neither payload nor original holds it
    assert letters[0].original is not None and "<EMAIL_1>" in letters[0].original


@pytest.mark.parametrize("failing", ["nli", "refusal"])
async def test_the_judge_processor_sends_the_stage_that_worked_and_dead_letters_the_other(
    failing: str,
) -> None:
    """NLI and refusal read one Converted but fail apart: the failing stage is dead-lettered under its
    name with its own error and the interaction to replay, the judge result still goes to the join with
    the other stage's result (the join emits the interaction incomplete at once), and the event is acked
    once both are out."""
    ctx, dead = context()
    lexical = LexicalJudge()
    res = resources()
    if failing == "nli":
        res.refusals = RefusalClassifier(lexical, ctx.settings)
    else:
        res.nli_judge = lexical
    event = keyed(CONVERTED.model_dump_json().encode())
    await run(JudgeProcessor(ctx, res), [event])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [(letter.stage, letter.interaction_id) for letter in letters] == [(failing, "i1")]
    assert letters[0].error_type == "JudgeError"  # the stage's own error
    assert letters[0].original is not None
    assert Interaction.model_validate_json(letters[0].original) == INTERACTION
    [raw] = ctx.topics[ctx.names.judged].sent
    judged = JudgeResult.model_validate_json(raw)
    assert (judged.interaction_id, judged.digest) == ("i1", CONVERTED.digest)
    if failing == "nli":
        assert judged.nli is None and judged.refusal is not None
        assert (judged.refusal.interaction_id, judged.refusal.answer_refusal) == ("i1", False)
    else:
        assert judged.refusal is None and judged.nli is not None
        assert {p.pair for p in judged.nli.pairs} >= {"context_answer"}
    assert event.acked


async def test_the_fused_processor_stores_the_interaction_incomplete_when_a_stage_fails_apart() -> None:
    """As the staged topology does: the failed stage is dead-lettered under its name with the interaction
    to replay, the Evaluation is still sent (``missing`` names the stage) and handed to this worker's sink
    at once; when its message comes back the sink only acks it."""
    ctx, dead = context()
    res = resources()
    event = keyed(INTERACTION.model_dump_json().encode())
    await run(EvaluateProcessor(ctx, res), [event])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [(d.stage, d.interaction_id, d.error_type) for d in letters] == [("refusal", "i1", "JudgeError")]
    assert letters[0].original is not None and event.acked
    [raw] = ctx.topics[ctx.names.evaluations].sent
    sent = Evaluation.model_validate_json(raw)
    assert sent.missing == ["refusal"] and sent.answer_refusal is None and sent.context_entailment is not None
    assert [e.interaction_id for e in res.sink.rows] == ["i1"] and res.sink.rows[0] == sent
    acked: list[str] = []
    assert res.handoff.claim((ctx.names.evaluations, 0, 0), lambda: acked.append("i1"))
    assert acked == ["i1"]  # its row is written: acked at once, not decoded or written again


async def test_a_judge_result_that_cannot_be_sent_dead_letters_the_message_once_per_stage() -> None:
    ctx, dead = context()
    res = resources()
    res.nli_judge = LexicalJudge()  # NLI works, refusal fails, and the broker refuses the result
    judged_topic = ctx.topics[ctx.names.judged]

    async def refuse(*, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        raise ConnectionError("broker gone")

    judged_topic.send = refuse  # type: ignore[method-assign]
    event = keyed(CONVERTED.model_dump_json().encode())
    await run(JudgeProcessor(ctx, res), [event])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [(letter.stage, letter.error_type) for letter in letters] == [
        ("nli", "ConnectionError"),
        ("refusal", "JudgeError"),
    ]
    assert event.acked


async def test_the_judge_processor_sends_no_refusal_result_when_refusal_is_asked_in_the_nli_prompt() -> None:
    ctx, dead = context()
    ctx.settings = ctx.settings.with_changes(pipeline={"refusal_mode": "same"})
    res = resources()
    res.nli_judge = LexicalJudge()
    event = keyed(CONVERTED.model_dump_json().encode())
    await run(JudgeProcessor(ctx, res), [event])
    [raw] = ctx.topics[ctx.names.judged].sent
    judged = JudgeResult.model_validate_json(raw)
    assert dead.sent == [] and judged.refusal is None and judged.nli is not None and event.acked


async def test_a_stopping_worker_cancels_both_judge_stages_and_sends_nothing() -> None:
    """Cancelled mid-judgement (the worker stops): the refusal stage's task goes with the event's, nothing
    is sent or dead-lettered (the event, never acked, comes back after the restart)."""
    ctx, dead = context()
    started: list[str] = []
    cancelled: list[str] = []

    async def hang(stage: str) -> Any:
        started.append(stage)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(stage)
            raise

    async def entail(*args: Any, **kwargs: Any) -> Any:
        return await hang("nli")

    res = resources()
    res.nli_judge = SimpleNamespace(name="hanging", entail=entail)  # pipeline.nli.run_nli asks it
    res.refusals = SimpleNamespace(classify=lambda message: hang("refusal"))
    task = asyncio.create_task(JudgeProcessor(ctx, res).process(CONVERTED))
    for _ in range(10):
        await asyncio.sleep(0)
    assert sorted(set(started)) == ["nli", "refusal"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(set(cancelled)) == ["nli", "refusal"] and len(cancelled) == len(started)
    assert dead.sent == [] and ctx.topics[ctx.names.judged].sent == []
