"""Graded verdicts from token log-probabilities (pipeline.llm.verdict_probs), on hand-made tokens."""

from __future__ import annotations

import math

import pytest

from pipeline.llm.verdict_probs import TokenLogprob, graded_scores, parse_logprobs, verdict_distributions
from schemas.results import VERDICT_SCORE


def tok(text: str, *alternatives: tuple[str, float]) -> TokenLogprob:
    """A token whose alternatives are given as probabilities (the first one is the token itself)."""
    top = tuple((t, math.log(p)) for t, p in alternatives)
    return TokenLogprob(text, top[0][1] if top else 0.0, top)


def answer_tokens(*verdict_tokens: TokenLogprob) -> list[TokenLogprob]:
    """``{"statements": [{"verdict": "<v>"}, ...]}`` with the given tokens starting each value."""
    out = [tok('{"statements": [')]
    for i, v in enumerate(verdict_tokens):
        out += [tok(", " if i else ""), tok('{"verdict": "'), v, tok('"}')]
    return [*out, tok("]}")]


def test_each_verdict_value_gets_its_distribution_in_order() -> None:
    tokens = answer_tokens(
        tok("entailed", ("entailed", 0.6), ("not_stated", 0.3), ("contradicted", 0.1)),
        tok("not", ("not", 0.7), ("ent", 0.2), ("cont", 0.1)),
    )
    first, second = verdict_distributions(tokens)
    assert first == pytest.approx({"entailed": 0.6, "contradicted": 0.1, "not_stated": 0.3})
    assert second == pytest.approx({"entailed": 0.2, "contradicted": 0.1, "not_stated": 0.7})


def test_a_token_that_starts_before_the_value_is_read_past_its_prefix() -> None:
    # BPE often fuses the opening quote with the value: ' "ent' after '"verdict":'
    tokens = [
        tok('{"verdict":'),
        tok(' "ent', (' "ent', 0.5), (' "not', 0.25), (' "', 0.2), (" '", 0.05)),
        tok('ailed"}'),
    ]
    (dist,) = verdict_distributions(tokens)
    # ' "' and " '" name no verdict: the rest is renormalised over the two that do
    assert dist == pytest.approx({"entailed": 2 / 3, "contradicted": 0.0, "not_stated": 1 / 3})


def test_alternatives_that_name_no_verdict_give_none() -> None:
    tokens = answer_tokens(tok('"', ('"', 0.9), ("x", 0.1)))
    assert verdict_distributions(tokens) == [None]


def test_scores_are_expected_verdict_scores_and_all_none_on_a_count_mismatch() -> None:
    tokens = answer_tokens(tok("ent", ("ent", 0.8), ("contr", 0.2)))
    assert graded_scores(tokens, 1, VERDICT_SCORE) == [pytest.approx(0.8)]
    scores = {"entailed": 1.0, "contradicted": 0.0, "not_stated": 0.5}
    assert graded_scores(tokens, 1, scores) == [pytest.approx(0.8)]
    tokens = answer_tokens(tok("not", ("not", 0.5), ("ent", 0.5)))
    assert graded_scores(tokens, 1, scores) == [pytest.approx(0.75)]
    assert graded_scores(tokens, 2, scores) == [None, None]  # the text holds one verdict, not two


def test_an_escaped_verdict_inside_a_reason_is_not_a_verdict() -> None:
    text = r'{"reason": "says \"verdict\": \"entailed\"", "verdict": "'
    tokens = [tok(text), tok("not", ("not", 1.0))]
    assert verdict_distributions(tokens) == [{"entailed": 0.0, "contradicted": 0.0, "not_stated": 1.0}]


def test_parse_logprobs_reads_the_openai_shape_and_tolerates_its_absence() -> None:
    choice = {
        "logprobs": {
            "content": [
                {"token": "ent", "logprob": -0.1, "top_logprobs": [{"token": "ent", "logprob": -0.1}]},
                {"token": "ailed", "logprob": 0, "top_logprobs": []},
            ]
        }
    }
    tokens = parse_logprobs(choice)
    assert [t.token for t in tokens] == ["ent", "ailed"]
    assert tokens[0].alternatives() == (("ent", -0.1),)
    assert parse_logprobs({"logprobs": None}) == []
    assert parse_logprobs({}) == []
    assert parse_logprobs({"logprobs": {"content": [{"logprob": 0}]}}) == []


def test_a_missing_or_non_finite_logprob_carries_no_probability() -> None:
    def choice(logprob: object, top: list[dict[str, object]]) -> dict[str, object]:
        return {
            "logprobs": {
                "content": [
                    {"token": '{"verdict": "', "logprob": 0.0, "top_logprobs": []},
                    {"token": "entailed", "logprob": logprob, "top_logprobs": top},
                    {"token": '"}', "logprob": 0.0, "top_logprobs": []},
                ]
            }
        }

    for missing in (None, math.nan, math.inf):
        tokens = parse_logprobs(choice(missing, []))
        assert tokens[1].logprob == -math.inf
        assert verdict_distributions(tokens) == [None]  # no mass at all: no distribution, not certainty
    nan_alternative = [{"token": "entailed", "logprob": -0.2}, {"token": "contradicted", "logprob": math.nan}]
    [dist] = verdict_distributions(parse_logprobs(choice(-0.2, nan_alternative)))
    assert dist is not None and dist["entailed"] == 1.0 and not any(math.isnan(v) for v in dist.values())


def test_alternatives_are_read_as_asked_and_keep_only_usable_entries() -> None:
    raw = [
        {"token": "ent", "logprob": -0.1},
        {"token": 7, "logprob": -0.2},
        {"token": "contr", "logprob": None},
        "junk",
        {"token": "not", "logprob": -3},
    ]
    [token] = parse_logprobs(
        {"logprobs": {"content": [{"token": "ent", "logprob": -0.1, "top_logprobs": raw}]}}
    )
    assert token.top == () and token.alternatives() == (("ent", -0.1), ("not", -3.0))
    given = TokenLogprob("ent", -0.1, (("ent", -0.1),), raw_top=raw)
    assert given.alternatives() == (("ent", -0.1),)  # alternatives given as read win


def as_choice(tokens: list[TokenLogprob]) -> dict[str, object]:
    """The chat-completions choice a server would send for ``tokens``."""
    content = [
        {
            "token": t.token,
            "logprob": t.logprob,
            "top_logprobs": [{"token": a, "logprob": p} for a, p in t.top],
        }
        for t in tokens
    ]
    return {"logprobs": {"content": content}}


def test_tokens_read_from_a_response_grade_as_the_same_tokens_given_whole() -> None:
    tokens = answer_tokens(
        tok("entailed", ("entailed", 0.6), ("not_stated", 0.3), ("contradicted", 0.1)),
        tok("", ("", 1.0)),  # an empty value (the next token closes it): no distribution
        tok("contr", ("contr", 0.7), ("ent", 0.3)),
        tok("not", ("not", 0.9), ("ent", 0.1)),
    )
    read = parse_logprobs(as_choice(tokens))
    assert len(read) == len(tokens) and [t.token for t in read[1:3]] == [t.token for t in tokens[1:3]]
    assert [t.alternatives() for t in read] == [t.top for t in tokens]
    given = verdict_distributions(tokens)
    assert verdict_distributions(read) == given
    assert [None if d is None else round(d["entailed"], 6) for d in given] == [0.6, None, 0.3, 0.1]


def test_a_token_entry_that_is_not_an_object_with_its_text_leaves_no_tokens() -> None:
    for bad in ("junk", None, ["ent", -0.1], {"token": None}, {"token": 7}):
        content = [{"token": "ent", "logprob": -0.1, "top_logprobs": []}, bad]
        assert list(parse_logprobs({"logprobs": {"content": content}})) == []
