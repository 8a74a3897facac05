"""Dead letters: a byte budget (prefix + sha256 + length), the original interaction, delivery awaited."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.clock import ManualClock
from schemas.deadletter import DeadLetter
from schemas.errors import JudgeError
from schemas.interaction import Interaction
from schemas.results import Converted
from schemas.settings import KafkaSettings
from streams.codec import Origin, dead_letter, encode, fit_letter, original_of, stage_of
from streams.context import StreamContext, new_context
from streams.resources import Resources
from streams.testing import RecordMetadata
from tests.fixtures import messages
from tests.settings_factory import make_settings

RECEIVED = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the records' timestamp

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at

INTERACTION = Interaction(interaction_id="i1", question="Where is it?", answer="It is here.")


def converted() -> Converted:
    sentences = {"question_sentences": ["Where is it?"], "answer_sentences": ["It is here."]}
    return messages.converted(INTERACTION, **sentences)


def test_a_long_payload_is_cut_to_the_budget_with_its_digest_and_length() -> None:
    payload = "é" * 300_000  # 600 000 UTF-8 bytes
    letter = fit_letter(
        dead_letter(
            failed_at=FAILED_AT, stage="validate", error=ValueError("bad"), payload=payload, source_topic="t"
        ),
        10_000,
    )
    assert letter.truncated and len(letter.payload.encode("utf-8")) <= 10_000
    assert payload.startswith(letter.payload) and len(letter.payload) == 5_000  # cut on a character
    assert letter.payload_bytes == 600_000
    assert letter.payload_sha256 == hashlib.sha256(payload.encode("utf-8")).hexdigest()
    ok = dead_letter(
        failed_at=FAILED_AT, stage="validate", error=ValueError("x"), payload="ok", source_topic="t"
    )
    short = fit_letter(ok, 10)
    assert not short.truncated and short.payload == "ok" and short.payload_sha256 is None


def test_an_original_that_does_not_fit_is_dropped() -> None:
    big = INTERACTION.model_copy(update={"answer": "x" * 20_000}).model_dump_json()
    letter = dead_letter(
        failed_at=FAILED_AT, stage="nli", error=ValueError("x"), payload="p", source_topic="t", original=big
    )
    assert fit_letter(letter, 50_000).original == big
    assert fit_letter(letter, 10_000).original is None


def test_the_original_interaction_is_found_in_a_converted_or_an_interaction() -> None:
    from_converted = original_of(converted().model_dump_json().encode())
    assert from_converted is not None
    assert Interaction.model_validate_json(from_converted) == INTERACTION  # replayable onto interactions
    assert original_of(INTERACTION.model_dump_json()) == INTERACTION.model_dump_json()
    assert original_of(b"not json") is None and original_of(json.dumps({"id": 1})) is None
    assert (
        DeadLetter(failed_at=FAILED_AT, stage="evaluate", error_type="E", error="e", payload="p").original
        is None
    )


def test_a_masked_converted_offers_the_message_as_sent_for_replay() -> None:
    """privacy.mode judge: the Converted holds placeholders and the values behind them; its dead letter's
    ``original`` is the interaction as it was sent, so a replay judges and stores the real text."""
    masked = INTERACTION.model_copy(update={"question": "Where is <EMAIL_1>'s key?"})
    message = converted().model_copy(update={"interaction": masked, "originals": {"<EMAIL_1>": "ann@x.org"}})
    original = original_of(message.model_dump_json().encode())
    assert original is not None
    assert Interaction.model_validate_json(original).question == "Where is ann@x.org's key?"


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
            fut.set_result(RecordMetadata("deadletter", 0, len(self.sent) - 1))
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
    await ctx.send_dead(dead_letter(failed_at=FAILED_AT,
        stage="validate", error=ValueError("x"), payload="y" * 100_000,
                                    source_topic="t"))  # fmt: skip
    sent = DeadLetter.model_validate_json(topic.sent[0])
    assert sent.truncated and len(sent.payload) == 2048 and sent.payload_bytes == 100_000


class BrokenWindows:
    async def finish(self, budget_s: float) -> Any:
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
    ctx.clock = clock = ManualClock()
    topic = ctx.topics[ctx.names.deadletter] = FailedDelivery()
    with caplog.at_level(logging.ERROR):
        sent = await ctx.dead_letter(ValueError("x"), "validate", "p", origin=Origin("t", 0, 7))
    assert not sent  # given up: the caller acks it all the same
    assert len(topic.sent) == ctx.settings.kafka.deadletter_attempts == 5
    assert clock.slept == [1.0, 2.0, 4.0, 8.0]  # the backoff between the five attempts
    assert "GIVING UP on t[0]@7" in caplog.text


async def test_a_dead_letter_that_fails_once_is_sent_on_the_next_attempt(tmp_path: Any) -> None:
    ctx = context(tmp_path)
    ctx.clock = ManualClock()
    topic = ctx.topics[ctx.names.deadletter] = FailedDelivery()
    first = topic.send

    async def flaky(*, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        topic.fail = len(topic.sent) == 0
        return await first(key=key, value=value)

    topic.send = flaky  # type: ignore[method-assign]
    assert await ctx.dead_letter(ValueError("x"), "validate", "p")
    assert len(topic.sent) == 2


async def test_every_failure_becomes_a_dead_letter_in_one_place() -> None:
    from schemas.errors import InvalidMessage, JudgeError, StageError

    raw = converted().model_dump_json().encode()
    error = InvalidMessage("answer: too long", "i9")
    bad = dead_letter(
        failed_at=FAILED_AT,
        stage=stage_of(error, "nli"),
        error=error,
        payload=b"{}",
        source_topic="t.converted",
    )
    assert (bad.stage, bad.interaction_id, bad.error_type) == ("validate", "i9", "InvalidMessage")
    judge = dead_letter(failed_at=FAILED_AT,
        stage=stage_of(JudgeError("x"), "nli"), error=JudgeError("429 after 4 retries"), payload=raw,
        origin=Origin("t.converted", 2, 40), interaction_id="i1",
    )  # fmt: skip
    assert (judge.stage, judge.interaction_id, judge.source_topic) == ("nli", "i1", "t.converted")
    assert judge.original is not None and Interaction.model_validate_json(judge.original) == INTERACTION
    fused = StageError("refusal", "timeout")
    letter = dead_letter(
        failed_at=FAILED_AT, stage=stage_of(fused, "evaluate"), error=fused, payload=raw, source_topic="t"
    )
    assert letter.stage == "refusal" and "timeout" in letter.error


def test_a_message_dead_lettered_twice_gets_the_same_id() -> None:
    """Redelivered after a crash, the same message makes the same letter id (so the same dead_letters row),
    though the letters were made at different times and for different errors."""
    raw = converted().model_dump_json().encode()
    where = Origin("t.converted", 1, 17)
    first = dead_letter(
        failed_at=FAILED_AT,
        stage="nli",
        error=JudgeError("429"),
        payload=raw,
        origin=where,
        interaction_id="i1",
    )
    again = dead_letter(
        failed_at=FAILED_AT,
        stage="nli",
        error=JudgeError("timeout"),
        payload=raw,
        origin=where,
        interaction_id="i1",
    )
    assert first.failed_at <= again.failed_at and first.dead_letter_id == again.dead_letter_id != ""
    # a message elsewhere, or the same message failing at another stage, is another letter
    assert dead_letter(failed_at=FAILED_AT,
        stage="nli", error=JudgeError("429"), payload=raw, origin=Origin("t.converted", 1, 18),
                       interaction_id="i1").dead_letter_id != first.dead_letter_id  # fmt: skip
    assert dead_letter(failed_at=FAILED_AT, stage="join", error=JudgeError("429"), payload=raw, origin=where,
                       interaction_id="i1").dead_letter_id != first.dead_letter_id  # fmt: skip
    # not read from Kafka as it is (a span of an OTLP export, a row ClickHouse rejects): stage and payload
    span = dead_letter(
        failed_at=FAILED_AT,
        stage="otlp",
        error=ValueError("no model"),
        payload='{"span_id": "a"}',
        source_topic="o",
    )
    assert (
        span.dead_letter_id
        == dead_letter(
            failed_at=FAILED_AT,
            stage="otlp",
            error=ValueError("other words"),
            payload='{"span_id": "a"}',
            source_topic="o",
        ).dead_letter_id
    )
    assert (
        span.dead_letter_id
        != dead_letter(
            failed_at=FAILED_AT,
            stage="otlp",
            error=ValueError("no model"),
            payload='{"span_id": "b"}',
            source_topic="o",
        ).dead_letter_id
    )


def test_the_dead_letters_row_is_keyed_by_the_letter_id() -> None:
    from streams.clickhouse.dead_letter_rows import dead_letter_row

    where = Origin("t.converted", 0, 3)
    one = dead_letter(failed_at=FAILED_AT, stage="nli", error=JudgeError("a"), payload="p", origin=where)
    two = dead_letter(failed_at=FAILED_AT, stage="nli", error=JudgeError("b"), payload="p", origin=where)
    assert one.model_dump_json() != two.model_dump_json()
    assert (
        dead_letter_row(encode(one), RECEIVED)[0]
        == dead_letter_row(encode(two), RECEIVED)[0]
        == one.dead_letter_id
    )
