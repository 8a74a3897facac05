"""Trust-Eval metrics (seed 003) on a tiny hand-computed set."""

from __future__ import annotations

import pytest

from pipeline.alternatives import squad_normalise
from pipeline.judges.lexical import LexicalJudge
from pipeline.metrics.trust_eval import (
    TrustEvalCase,
    exact_match,
    f1,
    split_cited_statements,
    trust_eval,
)


def test_normalize_and_exact_match() -> None:
    assert squad_normalise("The  Beatles!", split_on_punctuation=False) == "beatles"
    assert squad_normalise("U.S. state-of-the-art", split_on_punctuation=False) == "us stateoftheart"
    assert squad_normalise("U.S. state-of-the-art") == "u s state of art"
    assert exact_match("It was Ali Daei, I think.", ["Daei", "Bican"])
    assert not exact_match("Sinclairs", ["Sinclair"])  # whole words only
    assert not exact_match("anything", [])
    assert not exact_match("the", ["the"])  # an answer that normalises to nothing never matches


def test_f1() -> None:
    assert f1(0.5, 1.0) == pytest.approx(2 / 3)
    assert f1(0.0, 0.0) == 0.0
    assert f1(None, 1.0) is None


CASES = [
    # answered & answerable, correct
    TrustEvalCase(answer="Paris is the capital.", refused=False, answerable=True, gold_answers=["Paris"]),
    # answered & answerable, wrong
    TrustEvalCase(answer="Lyon is the capital.", refused=False, answerable=True, gold_answers=["Paris"]),
    # answered but unanswerable (parametric), happens to match
    TrustEvalCase(answer="It is 42.", refused=False, answerable=False, gold_answers=["42"]),
    # refused & unanswerable
    TrustEvalCase(answer="I don't know.", refused=True, answerable=False, gold_answers=["x"]),
    # refused but answerable
    TrustEvalCase(answer="Sorry, no idea.", refused=True, answerable=True, gold_answers=["Rome"]),
]


async def test_trust_eval_hand_computed() -> None:
    r = await trust_eval(CASES)
    assert (r.num_samples, r.answered_num, r.answerable_num, r.overlapped_num) == (5, 3, 3, 2)
    assert r.answered_ratio == pytest.approx(3 / 5)
    # refused & unanswerable = 1; unanswerable = 2; refused = 2
    assert r.reject_rec == pytest.approx(1 / 2) and r.reject_prec == pytest.approx(1 / 2)
    assert r.reject_f1 == pytest.approx(1 / 2)
    # answered & answerable = 2; answerable = 3; answered = 3
    assert r.answerable_rec == pytest.approx(2 / 3) and r.answerable_prec == pytest.approx(2 / 3)
    assert r.macro_avg == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert r.macro_f1 == pytest.approx((1 / 2 + 2 / 3) / 2)
    # EM: hits on cases 1 and 3 -> regular 2/5, answered 2/3
    assert r.em_cases == 5
    assert r.regular_em == pytest.approx(2 / 5) and r.answered_em == pytest.approx(2 / 3)
    # calibrated: answered & answerable & EM = 1 (case 1); / answered 3 ; / answerable 3
    assert r.calib_answered_em == pytest.approx(1 / 3) and r.calib_answerable_em == pytest.approx(1 / 3)
    assert r.calib_em_f1 == pytest.approx(1 / 3)
    assert r.parametric_answered_em == pytest.approx(1.0)
    # no [n] marker anywhere: no citation figures
    assert r.cited_cases == 0 and r.answered_citation_rec is None
    assert r.trust_score == pytest.approx(((1 / 2 + 2 / 3) / 2 + 1 / 3) / 2)


async def test_unknown_answerability_is_left_out() -> None:
    r = await trust_eval([TrustEvalCase(answer="Paris", refused=False, gold_answers=["Paris"])])
    assert r.reject_rec is None and r.macro_f1 is None and r.answerable_num == 0
    assert r.regular_em == 1.0 and r.calib_answered_em is None


def test_split_cited_statements() -> None:
    answer = "Paris is in France [1][2]. It has 2 million people [3]. No citation here."
    passages = ["Paris is in France.", "France is in Europe.", "Paris has 2 million people."]
    assert split_cited_statements(answer, passages) == [
        ("Paris is in France.", [1, 2]),
        ("It has 2 million people.", [3]),
        ("No citation here.", []),
    ]
    assert split_cited_statements("Paris is in France. [1]", passages) == [("Paris is in France.", [1])]
    # a reference to no passage counts as a citation (of nothing): 0
    assert split_cited_statements("Paris is in France [1][4].", passages) == [("Paris is in France.", [1, 0])]


async def test_citation_recall_and_precision_with_the_lexical_judge() -> None:
    passages = [
        "Paris is the capital of France.",
        "Bananas are yellow fruit.",
        "The city of Paris has about 2 million inhabitants.",
    ]
    answer = (
        "Paris is the capital of France [1][2]. Paris has 2 million inhabitants [3]. It has 9 bridges [1]."
    )
    cases = [
        TrustEvalCase(answer=answer, refused=False, answerable=True, passages=passages),
        TrustEvalCase(answer="I don't know.", refused=True, answerable=False, passages=passages),
    ]
    r = await trust_eval(cases, LexicalJudge())
    # statement 1: [1,2] supports; [1] alone supports (precise); [2] alone does not and [1] without it
    # does -> [2] imprecise. statement 2: [3] supports alone (precise). statement 3: "9 bridges" is
    # unsupported -> recall 0, its [1] imprecise.
    # recall 2/3, precision 2 precise of 4 citations = 1/2
    assert r.cited_cases == 1
    assert r.answered_citation_rec == pytest.approx(2 / 3)
    assert r.answered_citation_prec == pytest.approx(1 / 2)
    assert r.answered_citation_f1 == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))
    # regular: averaged over both cases; the refusal cites nothing and scores 0
    assert r.regular_citation_rec == pytest.approx(1 / 3)
    assert r.regular_citation_prec == pytest.approx(1 / 4)
    assert len(r.calls) > 0
