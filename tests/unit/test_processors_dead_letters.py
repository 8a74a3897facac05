"""Every processor, fed a bad message or hit by a failing judge, dead-letters it with its stage, the
reason and the original message, through the same runner and ``StreamContext.dead_letter``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.privacy.mask import Masker, PrivacyGuard
from pipeline.sampling import Sampler
from schemas.deadletter import DeadLetter
from schemas.errors import JudgeError, StageError
from schemas.interaction import Interaction
from schemas.results import Converted
from schemas.settings import PrivacySettings
from streams.context import StreamContext, new_context
from streams.processors.base import Processor
from streams.processors.convert import ConvertProcessor
from streams.processors.evaluate import EvaluateProcessor
from streams.processors.nli import NliProcessor
from streams.processors.refusal import RefusalProcessor
from streams.runner import run_bounded
from tests.settings_factory import make_settings

INTERACTION = Interaction(
    interaction_id="i1", question="Where is the key?", contexts=["The key hangs by the door."],
    answer="The key hangs by the front door. It opens the shed at the back of the garden.",
    ground_truth="By the door.",
)  # fmt: skip
CONVERTED = Converted(
    interaction=INTERACTION, question_sentences=["Where is the key?"],
    ground_truth_sentences=["By the door."],
    answer_sentences=["The key hangs by the front door.", "It opens the shed at the back of the garden."],
)  # fmt: skip


class Topic:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        self.sent.append(value)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result("ok")
        return fut


@dataclass
class Event:
    value: bytes
    key: bytes | None = b"i1"
    acked: bool = False
    message: Any = field(default_factory=lambda: SimpleNamespace(tp="t-0", offset=0, topic="t"))

    def ack(self) -> bool:
        self.acked = True
        return True


class Stream:
    def __init__(self, events: list[Event]) -> None:
        self._events = events

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Event]:
        for n, e in enumerate(self._events):
            e.message = SimpleNamespace(tp="t-0", offset=n, topic="t")
            yield e


class FailingJudge:
    async def pronouns(self, *args: Any, **kwargs: Any) -> Any:
        raise JudgeError("HTTP 401: bad key")


class Failing:
    """Every resource a processor calls fails like a judge that gave up."""

    def __getattr__(self, name: str) -> Any:
        async def fail(*args: Any, **kwargs: Any) -> Any:
            raise (
                StageError("refusal", "gave up after 5 attempts")
                if name == "evaluate"
                else JudgeError("gave up")
            )

        return fail


def resources() -> Any:
    async def ready() -> Any:
        return None

    failing = Failing()
    refusals = SimpleNamespace(classify=failing.classify)
    evaluator = SimpleNamespace(evaluate=failing.evaluate)
    return SimpleNamespace(
        wait_ready=ready,
        judge=failing,
        nli_judge=failing,
        refusals=refusals,
        evaluator=evaluator,
        relevance=None,
        sampler=Sampler.from_files(None, 1.0),  # every interaction judged
        privacy=PrivacyGuard(PrivacySettings()),  # privacy.mode off
    )


def context() -> tuple[StreamContext, Topic]:
    ctx = new_context(make_settings(pipeline={"pronoun_replacement": True}), app=None)  # type: ignore[arg-type]
    dead = ctx.topics[ctx.names.deadletter] = Topic()
    for name in ctx.names.all():
        ctx.topics.setdefault(name, Topic())
    return ctx, dead


async def run(processor: Processor[Any], events: list[Event]) -> None:
    await run_bounded(Stream(events), processor.handle, 4, on_error=processor.on_error)


GOOD = {"convert": INTERACTION, "nli": CONVERTED, "refusal": CONVERTED, "evaluate": INTERACTION}


@pytest.mark.parametrize(
    ("kind", "failed_stage"),
    [
        (ConvertProcessor, "convert"),
        (NliProcessor, "nli"),
        (RefusalProcessor, "refusal"),
        (EvaluateProcessor, "refusal"),
    ],
)
async def test_bad_input_and_judge_failures_are_dead_lettered(
    kind: type[Processor[Any]], failed_stage: str
) -> None:
    ctx, dead = context()
    processor = kind(ctx, resources())
    good = Event(GOOD[processor.stage].model_dump_json().encode())
    bad = Event(b'{"interaction_id": "i2", "question": 7}')
    await run(processor, [bad, good])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    stages = [letter.stage for letter in letters]
    if processor.dead_letters_invalid:
        assert stages == ["validate", failed_stage]
        assert letters[0].payload == bad.value.decode() and letters[0].source_topic == processor.source_topic
    else:  # the refusal processor reads the NLI processor's input, which dead-letters it once
        assert stages == [failed_stage] and processor.skipped_invalid == 1
    judged = letters[-1]
    assert judged.interaction_id == "i1" and judged.original is not None
    assert Interaction.model_validate_json(judged.original) == INTERACTION  # replayable
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
    event = Event(INTERACTION.model_dump_json().encode())
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
    await run(processor, [Event(planted.model_dump_json().encode())])
    letters = [DeadLetter.model_validate_json(raw) for raw in dead.sent]
    assert [d.stage for d in letters] == [failed_stage]
    assert "ann.lee@gmail.com" not in dead.sent[0].decode()  # neither payload nor original holds it
    assert letters[0].original is not None and "<EMAIL_1>" in letters[0].original
