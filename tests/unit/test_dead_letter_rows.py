"""Dead letters become dead_letters rows: app and model recovered when the message named them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from schemas.deadletter import DeadLetter
from streams.clickhouse.dead_letter_rows import DEAD_LETTER_COLUMNS, dead_letter_row
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.store import store_settings

RECEIVED = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the records' timestamp

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at


def letter(payload: str, original: str | None = None) -> bytes:
    return DeadLetter(failed_at=FAILED_AT,
        stage="validate", error_type="InvalidMessage", error="answer: too long",
        source_topic="gw.interactions", interaction_id="i1", payload=payload, original=original,
    ).model_dump_json().encode()  # fmt: skip


def test_row_names_app_and_model_from_the_payload() -> None:
    row = dict(
        zip(
            DEAD_LETTER_COLUMNS,
            dead_letter_row(letter(json.dumps({"app": "bot", "model": "m1"})), RECEIVED),
            strict=True,
        )
    )
    assert (row["stage"], row["app"], row["model"], row["interaction_id"]) == ("validate", "bot", "m1", "i1")


def test_row_reads_a_converted_messages_interaction() -> None:
    converted = json.dumps({"interaction": {"app": "bot", "model": "m2"}, "answer_sentences": []})
    row = dict(zip(DEAD_LETTER_COLUMNS, dead_letter_row(letter(converted), RECEIVED), strict=True))
    assert (row["app"], row["model"]) == ("bot", "m2")


def test_garbage_on_the_topic_is_still_a_row() -> None:
    row = dict(zip(DEAD_LETTER_COLUMNS, dead_letter_row(b"\xff not json", RECEIVED), strict=True))
    assert row["stage"] == "validate" and row["error_type"] == "InvalidDeadLetter" and row["app"] == ""


async def test_a_redelivered_letter_counts_once() -> None:
    store = ClickHouseStore.open_sync(store_settings())
    try:
        raw = letter("not json at all")
        await store.insert_dead_letter_rows([dead_letter_row(raw, RECEIVED)])
        await store.insert_dead_letter_rows(
            [dead_letter_row(raw, RECEIVED), dead_letter_row(letter("other"), RECEIVED)]
        )
        assert (await store.counts())["dead_letters"] == 2
    finally:
        store.close()
