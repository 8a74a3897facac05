"""Decoding at stream boundaries: errors name the field and the reason; payloads survive as text."""

from __future__ import annotations

import json

import pytest

from schemas.errors import InvalidMessage
from schemas.interaction import Interaction
from schemas.settings import Limits
from streams.codec import dead_letter, decode, encode, payload_text


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
    letter = dead_letter(stage="validate", error=InvalidMessage("bad"), payload=b"\xff", source_topic="t")
    assert (
        letter.payload.startswith("base64:")
        and letter.error == "bad"
        and letter.error_type == "InvalidMessage"
    )
