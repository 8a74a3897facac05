"""The one reader of JSON from outside (schemas.json_input): depth, NaN, encodings and lone surrogates
refused with a reason, never a RecursionError; the readers of JSON inside a message (a tool's result, an
OTLP attribute, a judge's prose) take a hostile string as text."""

from __future__ import annotations

import pytest

from pipeline.evidence import split_result
from pipeline.llm.client import extract_json_object
from pipeline.otlp import content
from schemas.errors import GroundwatchError
from schemas.json_input import DEFAULT_MAX_DEPTH, first_object, json_value, read_json
from schemas.tools import is_error_result

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads recurses once a level: RecursionError


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (DEEP, "nested deeper than 64 levels"),
        ('{"score": NaN}', "NaN is not a JSON number"),
        ('{"x": Infinity}', "Infinity is not a JSON number"),
        ('{"x": "\\ud800"}', "lone UTF-16 surrogate"),
        (b'{"x": "\xff"}', "not valid UTF-8"),
        ("{'single': 'quotes'}", "Expecting property name"),
    ],
)
def test_hostile_json_is_a_value_error_saying_why(raw: str | bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        read_json(raw)
    if isinstance(raw, str):
        assert json_value(raw) == (False, None)


def test_bytes_in_utf16_with_their_bom_and_a_depth_of_ones_own() -> None:
    assert read_json('{"a": [1]}'.encode("utf-16")) == {"a": [1]}
    assert read_json("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(ValueError, match="deeper than 1 levels"):
        read_json("[[1]]", max_depth=1)
    assert DEFAULT_MAX_DEPTH == 64


def test_json_inside_a_message_that_nests_too_deep_is_text_not_a_crash() -> None:
    assert content(DEEP) == (DEEP, ())  # an OTLP message content that only looks like parts
    assert split_result(DEEP, 8) == [(DEEP, None)]  # a tool result
    assert is_error_result("{" * 100_000 + "}" * 100_000) is False
    with pytest.raises(GroundwatchError, match="no JSON object"):
        extract_json_object("Sure: " + '{"a": ' * 5000 + "1" + "}" * 5000)
    assert first_object('prose {"verdict": "entailed"} more') == {"verdict": "entailed"}
    assert first_object('{"x": NaN} then {"y": 1}') == {"y": 1}
