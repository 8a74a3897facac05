"""A corpus of bad messages: each one decodes or becomes an InvalidMessage, and its dead letter (built and
fitted as the worker does) identifies the original; no exception ever escapes, whatever the bytes."""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from schemas.deadletter import DeadLetter
from schemas.errors import InvalidMessage
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.json_depth import json_depth_exceeds
from schemas.results import Converted
from schemas.settings import Limits
from streams.codec import dead_letter, decode, encode, fit_letter, original_of

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LIMITS = Limits()
MAX_BYTES = 4096  # small, so several payloads are cut


def ok(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"interaction_id": "i1", "question": "Q?", "answer": "A.",
                               "timestamp": NOW.isoformat()}  # fmt: skip
    base.update(fields)
    return base


def js(**fields: object) -> bytes:
    return json.dumps(ok(**fields)).encode()


def without(field: str) -> bytes:
    data = ok()
    data.pop(field)
    return json.dumps(data).encode()


def over(limit: str, field: str) -> bytes:
    """A message over one limit by one character."""
    n = getattr(LIMITS, limit) + 1
    return js(**{field: "x" * n})


def nested(depth: int, open_: str = "[", close: str = "]") -> bytes:
    return (b'{"interaction_id": "n", "question": "Q", "answer": "A", "metadata": {"x": '
            + open_.encode() * depth + close.encode() * depth + b"}}")  # fmt: skip


CORPUS: dict[str, bytes] = {
    # bytes that are not text
    "invalid utf-8": b'{"id": "u", "question": "\xff\xfe", "answer": "A"}',
    "lone continuation byte": b"\x80",
    "truncated utf-8 sequence": b'{"id": "u", "question": "\xe2\x82", "answer": "A"}',
    "utf-8 encoded surrogate": b'{"id": "u", "question": "\xed\xa0\x80", "answer": "A"}',
    "overlong utf-8": b'{"id": "u", "question": "\xc0\xaf", "answer": "A"}',
    "nul bytes": b"\x00\x00\x00\x00",
    "utf-16 with bom": codecs.BOM_UTF16_LE + json.dumps(ok()).encode("utf-16-le"),
    "utf-8 bom": codecs.BOM_UTF8 + js(),
    "binary noise": bytes(range(256)),
    # not JSON
    "empty": b"",
    "whitespace": b"   \n\t ",
    "not json": b"hello world",
    "truncated json": js()[:-5],
    "trailing garbage": js() + b" trailing",
    "two objects": js() + js(),
    "single quotes": b"{'id': 'x', 'question': 'Q', 'answer': 'A'}",
    "trailing comma": b'{"id": "x", "question": "Q", "answer": "A",}',
    "comment": b'{"id": "x", /* c */ "question": "Q", "answer": "A"}',
    "unterminated string": b'{"id": "x", "question": "Q',
    "unbalanced brackets": b'{"id": "x", "question": [[[, "answer": "A"}',
    "python literal": b"{'id': None}",
    # JSON, not an object
    "json array": b"[1, 2, 3]",
    "json number": b"42",
    "json null": b"null",
    "json true": b"true",
    "json string": b'"an interaction"',
    "empty object": b"{}",
    "array of interactions": b"[" + js() + b"]",
    # missing fields and wrong types
    "missing question": without("question"),
    "missing answer": without("answer"),
    "missing id": without("interaction_id"),
    "empty id": js(interaction_id=""),
    "id is a list": js(interaction_id=["a"]),
    "id is null": js(interaction_id=None),
    "id is a bool": js(interaction_id=True),
    "question is a number": js(question=5),
    "answer is an object": js(answer={"text": "A"}),
    "contexts is a number": js(contexts=5),
    "contexts of numbers": js(contexts=[1, 2]),
    "passage with unknown field": js(contexts=[{"text": "t", "url": "u"}]),
    "document is a list": js(contexts=[{"text": "t", "document": ["d"]}]),
    "metadata is a list": js(metadata=[1]),
    "labels not ints": js(labels={"grounded": "yes"}),
    "timestamp garbage": js(timestamp="yesterday"),
    "timestamp is a list": js(timestamp=[2026]),
    # every limit exceeded by one
    "question over limit": over("max_question_chars", "question"),
    "answer over limit": over("max_answer_chars", "answer"),
    "ground truth over limit": over("max_ground_truth_chars", "ground_truth"),
    "id over limit": over("max_id_chars", "interaction_id"),
    "app over limit": over("max_app_chars", "app"),
    "model over limit": over("max_model_chars", "model"),
    "conversation id over limit": over("max_conversation_id_chars", "conversation_id"),
    "document name over limit": js(
        contexts=[{"text": "t", "document": "d" * (LIMITS.max_document_chars + 1)}]
    ),
    "too many contexts": js(contexts=["c"] * (LIMITS.max_contexts + 1)),
    "contexts over char budget": js(contexts=["c" * LIMITS.max_context_chars, "c"]),
    "document names over char budget": js(
        contexts=[{"text": "c" * (LIMITS.max_context_chars - 10), "document": "d" * 11}]
    ),
    "metadata over limit": js(metadata={"k": "v" * LIMITS.max_metadata_chars}),
    "unknown fields over metadata limit": js(extra_field="v" * LIMITS.max_metadata_chars),
    "nesting one over the limit": nested(LIMITS.max_json_depth),  # + the outer object
    # deep nesting and huge values
    "deep arrays (100k)": nested(100_000),
    "deep objects (100k)": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep unclosed (1M)": b"[" * 1_000_000,
    "huge integer": b'{"id": 1' + b"0" * 5000 + b', "question": "Q", "answer": "A"}',
    "huge integer id": b'{"id": 1' + b"0" * 1000 + b', "question": "Q", "answer": "A"}',
    "huge float": b'{"id": "f", "question": "Q", "answer": "A", "metadata": {"x": 1e999999}}',
    "huge exponent timestamp": b'{"id": "f", "question": "Q", "answer": "A", "timestamp": 1e308}',
    "NaN": b'{"id": "f", "question": "Q", "answer": "A", "metadata": {"x": NaN}}',
    "Infinity timestamp": b'{"id": "f", "question": "Q", "answer": "A", "timestamp": Infinity}',
    "-Infinity": b'{"id": "f", "question": "Q", "answer": "A", "metadata": {"x": -Infinity}}',
    # strange text
    "control characters raw": b'{"id": "c", "question": "Q\x01\x1b[31m", "answer": "A"}',
    "escaped control characters": js(app="app\n[CRITICAL] FORGED LOG LINE\x1b[2J"),
    "bidi override": js(app="evil\u202etxt.exe"),
    "lone surrogate escape": b'{"id": "s", "question": "\\ud800", "answer": "A"}',
    "escaped nul": js(question="a\u0000b"),
    "duplicate keys": b'{"id": "d", "id": "e", "question": "Q", "answer": "A"}',
    "duplicate id and interaction_id": b'{"id": "d", "interaction_id": "e", "question": "Q", "answer": "A"}',
    "brackets inside strings": js(question="[" * 10_000),
    # timestamps out of range
    "timestamp 9999": js(timestamp="9999-12-31T23:59:59Z"),
    "timestamp 0001": js(timestamp="0001-01-01T00:00:00Z"),
    "timestamp 0001 +01:00": js(timestamp="0001-01-01T00:00:00+01:00"),
    "timestamp year 1 in seconds": js(timestamp=-62135596800),
    "timestamp in milliseconds": js(timestamp=int(NOW.timestamp() * 1000)),
    "timestamp in microseconds": js(timestamp=int(NOW.timestamp() * 1_000_000)),
    "timestamp an hour and a second ahead": js(timestamp=(NOW + timedelta(seconds=3601)).isoformat()),
    "timestamp 401 days old": js(timestamp=(NOW - timedelta(days=401)).isoformat()),
    "timestamp negative zero year": js(timestamp="-0001-01-01T00:00:00Z"),
    "timestamp month 13": js(timestamp="2026-13-01T00:00:00Z"),
    # big message
    "one megabyte answer": js(answer="x" * 1_000_000),
}


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
