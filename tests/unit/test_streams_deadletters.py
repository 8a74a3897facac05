"""Dead letters: a byte budget (prefix + sha256 + length), the original interaction, delivery awaited."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any

import pytest

from schemas.deadletter import DeadLetter
from schemas.interaction import Interaction
from schemas.results import Converted
from schemas.settings import KafkaSettings
from streams.codec import dead_letter, fit_letter, original_of
from streams.context import StreamContext, new_context
from streams.resources import Resources
from tests.settings_factory import make_settings

INTERACTION = Interaction(interaction_id="i1", question="Where is it?", answer="It is here.")


def converted() -> Converted:
    return Converted(
        interaction=INTERACTION, question_sentences=["Where is it?"], answer_sentences=["It is here."],
        ground_truth_sentences=[],
    )  # fmt: skip


def test_a_long_payload_is_cut_to_the_budget_with_its_digest_and_length() -> None:
    payload = "é" * 300_000  # 600 000 UTF-8 bytes
    letter = fit_letter(
        dead_letter(stage="validate", error=ValueError("bad"), payload=payload, source_topic="t"), 10_000
    )
    assert letter.truncated and len(letter.payload.encode("utf-8")) <= 10_000
    assert payload.startswith(letter.payload) and len(letter.payload) == 5_000  # cut on a character
    assert letter.payload_bytes == 600_000
    assert letter.payload_sha256 == hashlib.sha256(payload.encode("utf-8")).hexdigest()
    ok = dead_letter(stage="validate", error=ValueError("x"), payload="ok", source_topic="t")
    short = fit_letter(ok, 10)
    assert not short.truncated and short.payload == "ok" and short.payload_sha256 is None


def test_an_original_that_does_not_fit_is_dropped() -> None:
    big = INTERACTION.model_copy(update={"answer": "x" * 20_000}).model_dump_json()
    letter = dead_letter(stage="nli", error=ValueError("x"), payload="p", source_topic="t", original=big)
    assert fit_letter(letter, 50_000).original == big
    assert fit_letter(letter, 10_000).original is None


def test_the_original_interaction_is_found_in_a_converted_or_an_interaction() -> None:
    from_converted = original_of(converted().model_dump_json().encode())
    assert from_converted is not None
    assert Interaction.model_validate_json(from_converted) == INTERACTION  # replayable onto interactions
    assert original_of(INTERACTION.model_dump_json()) == INTERACTION.model_dump_json()
    assert original_of(b"not json") is None and original_of(json.dumps({"id": 1})) is None
    assert DeadLetter(stage="evaluate", error_type="E", error="e", payload="p").original is None


class FailedDelivery:
    """A faust topic whose send() buffers and hands back a delivery future that fails (broker refused)."""

    def __init__(self, fail: bool = True) -> None:
        self.fail = fail
        self.sent: list[bytes] = []

    async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        self.sent.append(value)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.fail:
            fut.set_exception(RuntimeError("MessageSizeTooLargeError"))
        else:
            fut.set_result("metadata")
        return fut


def context(tmp_path: Any) -> StreamContext:
    settings = make_settings(kafka=KafkaSettings(datadir=tmp_path, deadletter_max_bytes=2048))
    return new_context(settings, app=None)  # type: ignore[arg-type]


async def test_send_raises_when_the_broker_does_not_confirm(tmp_path: Any) -> None:
    ctx = context(tmp_path)
    ctx.topics[ctx.names.evaluations] = FailedDelivery()
    with pytest.raises(RuntimeError, match="MessageSizeTooLarge"):
        await ctx.send(ctx.names.evaluations, "k", INTERACTION)


async def test_send_dead_fits_the_letter_to_the_budget(tmp_path: Any) -> None:
    ctx = context(tmp_path)
    topic = ctx.topics[ctx.names.deadletter] = FailedDelivery(fail=False)
    await ctx.send_dead(dead_letter(stage="validate", error=ValueError("x"), payload="y" * 100_000,
                                    source_topic="t"))  # fmt: skip
    sent = DeadLetter.model_validate_json(topic.sent[0])
    assert sent.truncated and len(sent.payload) == 2048 and sent.payload_bytes == 100_000


class BrokenWindows:
    async def close_due(self, final: bool = False) -> list[Any]:
        raise RuntimeError("chdb went away")


async def test_errors_on_stop_are_logged_not_swallowed(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = context(tmp_path)
    resources = Resources(ctx)
    resources._windows = BrokenWindows()  # type: ignore[assignment]
    with caplog.at_level(logging.ERROR):
        await resources.on_stop()
    assert "closing the open windows on stop failed" in caplog.text and "chdb went away" in caplog.text


async def test_a_dead_letter_that_cannot_be_sent_is_given_up_after_the_attempts(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = context(tmp_path)
    topic = ctx.topics[ctx.names.deadletter] = FailedDelivery()
    letter = dead_letter(stage="validate", error=ValueError("x"), payload="p", source_topic="t")
    with caplog.at_level(logging.ERROR):
        await ctx.send_dead_or_give_up(letter, "t@7", retry_delay_s=0)  # returns: the caller acks
    assert len(topic.sent) == ctx.settings.kafka.deadletter_attempts == 5
    assert "GIVING UP on t@7" in caplog.text


async def test_every_failure_becomes_a_dead_letter_in_one_place(tmp_path: Any) -> None:
    from schemas.errors import InvalidMessage, JudgeError, StageError

    ctx = context(tmp_path)
    raw = converted().model_dump_json().encode()
    bad = ctx.letter_for(InvalidMessage("answer: too long", "i9"), "nli", b"{}", "t.converted", None)
    assert (bad.stage, bad.interaction_id, bad.error_type) == ("validate", "i9", "InvalidMessage")
    judge = ctx.letter_for(JudgeError("429 after 4 retries"), "nli", raw, "t.converted", "i1")
    assert (judge.stage, judge.interaction_id, judge.source_topic) == ("nli", "i1", "t.converted")
    assert judge.original is not None and Interaction.model_validate_json(judge.original) == INTERACTION
    fused = ctx.letter_for(StageError("refusal", "timeout"), "evaluate", raw, "t.interactions", "i1")
    assert fused.stage == "refusal" and "timeout" in fused.error
