"""``privacy.mode`` all: a message that fails validation was never masked, so its reason, the log
lines about it and its ``dead_letters`` row carry none of its values (``schemas.validation``)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from schemas.deadletter import DeadLetter
from schemas.errors import InvalidMessage
from schemas.interaction import Interaction
from schemas.validation import describe_validation_error
from streams.clickhouse.dead_letter_rows import dead_letter_row
from streams.codec import decode
from streams.processors.convert import ConvertProcessor
from streams.runner import run_bounded
from streams.testing import Event, ManualClock, Stream, fake_context
from tests.fixtures.bad_messages import CORPUS
from tests.settings_factory import make_settings

SECRET = "jane.doe@example.com"
NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)


def message(**fields: Any) -> bytes:
    base: dict[str, Any] = {"interaction_id": "i1", "question": "Q?", "answer": "A."}
    base["timestamp"] = NOW.isoformat()
    base.update(fields)
    return json.dumps(base).encode()


BAD = {
    "a passage's unknown key": message(contexts=[{"text": "t", f"owner {SECRET}": "x"}]),
    "a labels key": message(labels={SECRET: "one"}),
    "a timestamp": message(timestamp=SECRET),
    "a timestamp too far ahead": message(timestamp="2031-02-03T04:05:06+00:00"),
    "a question that is an object": message(question={"who": SECRET}),
    "a history turn": message(history=[{"role": SECRET, "content": "hi"}]),
}
VALUES = {name: ([SECRET] if SECRET in raw.decode() else ["2031-02-03"]) for name, raw in BAD.items()}


@pytest.mark.parametrize("name", sorted(BAD))
async def test_in_mode_all_no_reason_log_line_or_row_carries_a_value(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = fake_context(make_settings(privacy={"mode": "all"}), ManualClock(NOW))

    async def ready() -> None:
        return None

    resources = SimpleNamespace(wait_ready=ready, privacy=SimpleNamespace(mode="all"))
    processor = ConvertProcessor(ctx, resources)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG)
    await run_bounded(Stream([Event(BAD[name], key=b"i1")]), processor.handle, 1, on_error=processor.on_error)
    [sent] = ctx.topics[ctx.names.deadletter].sent
    letter = DeadLetter.model_validate_json(sent)
    assert letter.stage == "validate" and letter.error.startswith("invalid Interaction: ")
    row = dead_letter_row(sent, NOW)
    logged = [r.getMessage() for r in caplog.records]
    for value in VALUES[name]:
        assert value not in letter.error
        assert not any(value in str(column) for column in row if column != letter.payload)
        assert not any(value in line for line in logged), logged
    assert letter.failed_at == NOW  # the worker's clock


def test_outside_mode_all_the_reason_still_says_which_value() -> None:
    with pytest.raises(InvalidMessage) as caught:
        decode(BAD["a passage's unknown key"], Interaction, now=NOW)
    assert SECRET in str(caught.value)
    with pytest.raises(InvalidMessage) as hidden:
        decode(BAD["a passage's unknown key"], Interaction, now=NOW, values=False)
    assert str(hidden.value) == "invalid Interaction: contexts.0.…: Extra inputs are not permitted"


def test_hidden_locations_keep_field_names_and_positions() -> None:
    class Inner(BaseModel):
        model_config = ConfigDict(extra="forbid")
        text: str

    class Outer(BaseModel):
        items: list[Inner]
        scores: dict[str, int]

    with pytest.raises(ValidationError) as caught:
        Outer.model_validate({"items": [{"text": "a", SECRET: 1}], "scores": {SECRET: "x", "ok": "y"}})
    hidden = describe_validation_error(caught.value, values=False, model=Outer)
    assert SECRET not in hidden
    assert "items.0.…: Extra inputs are not permitted" in hidden and "scores.…:" in hidden
    assert "scores.ok" not in hidden  # a dict's key is the input's, whatever it reads
    shown = describe_validation_error(caught.value)
    assert f"items.0.{SECRET}" in shown


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in [str(k), *_leaves(v)]]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_no_bad_message_of_the_corpus_is_quoted_in_its_hidden_reason(name: str) -> None:
    raw = CORPUS[name]
    try:
        decode(raw, Interaction, now=NOW, values=False)
    except InvalidMessage as exc:
        reason = str(exc)
    else:
        return
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return  # not JSON: the reason says so and quotes nothing
    fields = set(Interaction.model_fields) | {"id", "text", "document", "role", "content", "score"}
    for leaf in _leaves(data):
        if len(leaf) >= 6 and leaf not in fields:
            assert leaf not in reason, (leaf, reason)
