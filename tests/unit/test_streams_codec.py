"""Decoding at stream boundaries: errors name the field and the reason; payloads survive as text."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from schemas.errors import InvalidMessage
from schemas.interaction import Interaction
from schemas.label import Label
from schemas.results import Converted
from schemas.settings import Limits
from streams.codec import dead_letter, decode, encode, payload_text

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at


def test_valid_message_round_trips() -> None:
    inter = Interaction(interaction_id="a1", question="Q?", answer="A.")
    assert decode(encode(inter), Interaction) == inter


def test_missing_fields_are_named_and_the_id_is_kept() -> None:
    with pytest.raises(InvalidMessage) as err:
        decode(json.dumps({"id": 42, "question": "Q?"}).encode(), Interaction)
    assert "answer: Field required" in str(err.value)
    assert err.value.interaction_id == "42"


def test_size_limit_from_settings_names_field_and_limit() -> None:
    raw = json.dumps({"interaction_id": "x", "question": "Q?", "answer": "abcdef"})
    with pytest.raises(InvalidMessage) as err:
        decode(raw.encode(), Interaction, Limits(max_answer_chars=5))
    assert "answer" in str(err.value) and "over the limit of 5" in str(err.value)


def test_not_json_and_empty() -> None:
    with pytest.raises(InvalidMessage, match="not valid JSON"):
        decode(b"{nope", Interaction)
    with pytest.raises(InvalidMessage, match="empty message"):
        decode(None, Interaction)


def test_undecodable_bytes_are_kept_as_base64() -> None:
    assert payload_text(b"\xff\xfe") == "base64://4="
    letter = dead_letter(
        failed_at=FAILED_AT, stage="validate", error=InvalidMessage("bad"), payload=b"\xff", source_topic="t"
    )
    assert (
        letter.payload.startswith("base64:")
        and letter.error == "bad"
        and letter.error_type == "InvalidMessage"
    )


def converted_json(**changes: object) -> bytes:
    """A Converted as a stage writes it (``encode``), with ``changes`` made to its JSON."""
    inter = Interaction(interaction_id="c1", question="Q?", answer="A.", metadata={"k": [1, 2]})
    converted = Converted(
        interaction=inter, question_sentences=["Q?"], answer_sentences=["A."], ground_truth_sentences=[]
    )
    data = json.loads(encode(converted))
    data.update(changes)
    return json.dumps(data).encode()


def test_a_message_between_stages_decodes_to_what_the_checked_path_gives() -> None:
    raw = converted_json()
    fast = decode(raw, Converted, Limits(), between_stages=True)
    assert fast == decode(raw, Converted, Limits())
    assert fast.interaction.metadata == {"k": [1, 2]} and fast.answer_sentences == ["A."]


def test_a_message_between_stages_is_still_validated_with_the_same_reasons() -> None:
    cases = [
        (b"{nope", "not valid JSON"),  # not JSON at all
        (converted_json(seconds="NaN").replace(b'"NaN"', b"NaN"), "NaN is not a JSON number"),
        (converted_json(answer_sentences="A."), "answer_sentences: Input should be a valid list"),
        (converted_json(interaction={"interaction_id": "c1", "question": "Q?"}), "interaction.answer"),
    ]
    for raw, reason in cases:
        for between_stages in (True, False):
            with pytest.raises(InvalidMessage, match=reason):
                decode(raw, Converted, Limits(), between_stages=between_stages)


def test_the_interaction_between_stages_keeps_the_configured_limits() -> None:
    with pytest.raises(InvalidMessage, match="over the limit of 1"):
        decode(converted_json(), Converted, Limits(max_answer_chars=1), between_stages=True)


def test_a_message_without_its_time_takes_the_record_time_else_the_workers_clock() -> None:
    record, clock = datetime(2026, 11, 20, 9, tzinfo=UTC), datetime(2026, 11, 20, 10, tzinfo=UTC)
    label = b'{"interaction_id": "i1", "kind": "grounded", "value": 1, "reviewer": "ann"}'
    assert decode(label, Label, now=clock, received_at=record).labeled_at == record
    assert decode(label, Label, now=clock).labeled_at == clock
    given = (
        b'{"interaction_id": "i1", "kind": "grounded", "value": 1, "reviewer": "ann", '
        b'"labeled_at": "2026-11-19T08:00:00Z"}'
    )
    assert decode(given, Label, now=clock, received_at=record).labeled_at == datetime(
        2026, 11, 19, 8, tzinfo=UTC
    )
    interaction = b'{"id": "i1", "question": "q?", "answer": "a."}'
    assert decode(interaction, Interaction, now=clock).timestamp == clock
    with pytest.raises(InvalidMessage, match="labeled_at"):
        decode(label, Label)  # no clock at all: nothing to stamp it with
