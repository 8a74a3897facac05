"""A corpus of bad messages: each one decodes or becomes an InvalidMessage, and its dead letter (built and
fitted as the worker does) identifies the original; no exception ever escapes, whatever the bytes."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from schemas.deadletter import DeadLetter
from schemas.errors import InvalidMessage
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.json_depth import json_depth_exceeds
from schemas.results import Converted
from streams.codec import dead_letter, decode, encode, fit_letter, original_of
from tests.fixtures.bad_messages import CORPUS, LIMITS, NOW, js, nested

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at

MAX_BYTES = 4096  # small, so several payloads are cut


def test_the_corpus_has_at_least_60_kinds() -> None:
    assert len(CORPUS) >= 60


def letter_of(raw: bytes) -> tuple[str, DeadLetter | Interaction]:
    """What the worker does with one message: the decoded model, or its fitted dead letter."""
    try:
        return "decoded", decode(raw, Interaction, LIMITS, now=NOW)
    except InvalidMessage as exc:
        letter = dead_letter(failed_at=FAILED_AT,
            stage="validate", error=exc, payload=raw, source_topic="interactions",
                             original=original_of(raw))  # fmt: skip
        return "dead", fit_letter(letter, MAX_BYTES)


def identifies(letter: DeadLetter, raw: bytes) -> bool:
    """The letter's payload (whole, or cut with the whole's sha256) is this message."""
    if letter.truncated:
        text = letter.payload
        whole = raw.decode("utf-8") if not text.startswith("base64:") else None
        digest = hashlib.sha256((whole or "base64:" + base64.b64encode(raw).decode()).encode()).hexdigest()
        return letter.payload_sha256 == digest and (whole is None or whole.startswith(text))
    if letter.payload.startswith("base64:") and not raw.startswith(b"base64:"):
        return base64.b64decode(letter.payload[7:]) == raw
    return letter.payload.encode("utf-8") == raw


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_bad_message_decodes_or_becomes_an_identifying_dead_letter(name: str) -> None:
    raw = CORPUS[name]
    outcome, result = letter_of(raw)
    if outcome == "decoded":
        assert isinstance(result, Interaction)
        return
    assert isinstance(result, DeadLetter)
    assert result.stage == "validate" and result.error_type == "InvalidMessage" and result.error
    assert identifies(result, raw), name
    sent = encode(result)  # what goes to the broker: within the budget plus the letter's own fields
    assert len(sent) <= MAX_BYTES + 4000 + 2000
    assert DeadLetter.model_validate_json(sent).payload == result.payload


EXPECTED_DEAD = [
    "invalid utf-8", "not json", "json array", "json null", "missing answer", "id over limit",
    "app over limit", "model over limit", "conversation id over limit", "document name over limit",
    "document names over char budget", "metadata over limit", "nesting one over the limit",
    "deep arrays (100k)", "deep objects (100k)", "deep unclosed (1M)", "huge integer", "NaN",
    "Infinity timestamp", "lone surrogate escape", "timestamp 9999", "timestamp 0001",
    "timestamp 0001 +01:00",
    "timestamp year 1 in seconds", "timestamp in milliseconds", "timestamp an hour and a second ahead",
    "timestamp 401 days old", "huge exponent timestamp",
]  # fmt: skip


@pytest.mark.parametrize("name", EXPECTED_DEAD)
def test_these_are_refused(name: str) -> None:
    assert letter_of(CORPUS[name])[0] == "dead"


def test_reasons_name_the_problem() -> None:
    def reason(name: str) -> str:
        _, letter = letter_of(CORPUS[name])
        assert isinstance(letter, DeadLetter)
        return letter.error

    assert "nested deeper than 64" in reason("deep arrays (100k)")
    assert "not valid UTF-8" in reason("invalid utf-8")
    assert "NaN is not a JSON number" in reason("NaN")
    assert "contexts[0].document has 1001 characters" in reason("document name over limit")
    assert "passages and document names" in reason("document names over char budget")
    assert "app has 201 characters" in reason("app over limit")
    assert "lone UTF-16 surrogate" in reason("lone surrogate escape")


def test_the_limit_itself_is_accepted() -> None:
    at_limit = [
        js(app="a" * LIMITS.max_app_chars),
        js(contexts=[{"text": "t", "document": "d" * LIMITS.max_document_chars}]),
        nested(LIMITS.max_json_depth - 2),
    ]
    for raw in at_limit:
        assert isinstance(decode(raw, Interaction, LIMITS, now=NOW), Interaction)


@pytest.mark.parametrize("model", [Converted, Evaluation])
def test_other_models_refuse_the_deep_ones_too(model: type) -> None:
    for name in ("deep arrays (100k)", "deep unclosed (1M)", "binary noise", "NaN"):
        with pytest.raises(InvalidMessage):
            decode(CORPUS[name], model, LIMITS)


def test_original_of_never_raises() -> None:
    for raw in CORPUS.values():
        original = original_of(raw)
        assert original is None or isinstance(original, str)


def test_the_depth_scan_ignores_brackets_in_strings() -> None:
    assert not json_depth_exceeds(json.dumps({"q": "[[[[{{{{" * 100, "e": '\\"[[['}), 3)
    assert json_depth_exceeds("[" * 5, 4) and not json_depth_exceeds("[" * 4, 4)


def test_a_failing_validator_is_an_invalid_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever goes wrong inside validation (here a RecursionError or MemoryError) is a bad message."""
    for error in (RecursionError("maximum recursion depth exceeded"), MemoryError()):

        def boom(*args: object, _e: BaseException = error, **kwargs: object) -> Callable[..., object]:
            raise _e

        monkeypatch.setattr(Interaction, "model_validate", boom)
        with pytest.raises(InvalidMessage, match=type(error).__name__):
            decode(js(), Interaction, LIMITS, now=NOW)
