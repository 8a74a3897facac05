"""Grounded-unit precision (docs/method.md) and unsupported claims."""

from __future__ import annotations

import pytest

from pipeline.metrics.grounded import grounded_precision, units, unsupported_claims
from schemas.results import HypothesisResult, PairResult, StatementVerdict


def statement(text: str, score: float, tag: str = "claim") -> StatementVerdict:
    verdict = "entailed" if score >= 0.5 else "not_stated"
    return StatementVerdict(statement=text, verdict=verdict, score=score, tag=tag)


def pair(*hypotheses: list[StatementVerdict]) -> PairResult:
    results = [
        HypothesisResult(
            hypothesis=" and ".join(s.statement for s in h),
            statements=h,
            score=sum(s.score for s in h) / len(h) if h else 0.0,
        )
        for h in hypotheses
    ]
    return PairResult(pair="context_answer", hypotheses=results, score=0.0)


def test_seed_002_examples() -> None:
    four = pair([statement("a", 1), statement("b", 1)], [statement("c", 1), statement("d", 0)])
    assert grounded_precision(four) == pytest.approx(0.75)
    partial = pair([statement("a", 1), statement("b", 1)], [statement("c", 1), statement("d", 0.6)])
    assert grounded_precision(partial) == pytest.approx(0.9)
    three_of_five = pair([statement(x, 1) for x in "abc"], [statement("d", 0), statement("e", 0)])
    assert grounded_precision(three_of_five) == pytest.approx(0.6)


def test_units_are_statements_not_hypotheses() -> None:
    # mean of hypothesis means would be (1 + 0.5) / 2 = 0.75; unit precision is 2 of 3
    p = pair([statement("a", 1)], [statement("b", 1), statement("c", 0)])
    assert grounded_precision(p) == pytest.approx(2 / 3)


def test_weights_by_tag() -> None:
    p = pair([statement("capital", 1, "entity"), statement("population", 0, "Number")])
    assert grounded_precision(p) == pytest.approx(0.5)
    assert grounded_precision(p, {"number": 3.0}) == pytest.approx(0.25)
    assert grounded_precision(p, {"entity": 0.0, "number": 0.0}) is None


def test_hypothesis_without_statements_is_one_unit() -> None:
    p = pair([statement("a", 1)])
    p.hypotheses.append(HypothesisResult(hypothesis="bare", statements=[], score=0.0))
    assert units(p)[-1] == ("bare", 0.0, "")
    assert grounded_precision(p) == pytest.approx(0.5)


def test_none_without_units() -> None:
    assert grounded_precision(None) is None
    assert grounded_precision(PairResult(pair="context_answer")) is None
    assert unsupported_claims(None, 0.5) == []


def test_unsupported_claims_under_the_threshold() -> None:
    p = pair([statement("a", 1), statement("b", 0.4)], [statement("c", 0.5), statement("b", 0.0)])
    assert unsupported_claims(p, 0.5) == ["b"]
    assert unsupported_claims(p, 0.6) == ["b", "c"]
