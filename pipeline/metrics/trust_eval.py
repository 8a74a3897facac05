"""Trust-Eval metrics (docs/method.md) over a labeled set of responses.

Inputs, one ``TrustEvalCase`` per question:

- ``answer``: the response; ``refused``: whether it is a refusal (the pipeline's ``answer_refusal``);
- ``answerable``: whether the question can be answered from its documents (an ``answerable`` label, or
  a ground truth that is not itself a refusal); None when unknown: the case is then left out of the
  answerable/reject figures;
- ``gold_answers``: short answers for exact match (``gold_answers`` field, or the ground truth split on
  `` | ``); [] when none: the case is left out of the exact-match figures;
- ``passages``: the contexts in order, so that an inline marker ``[n]`` cites ``passages[n-1]`` (the
  markers are read as on the stream, ``pipeline.citations``).

Outputs are fractions in [0, 1] (Trust-Eval prints percentages), None where a denominator is 0:

- answered/answerable counts; ``reject_rec`` = refused & unanswerable / unanswerable, ``reject_prec`` =
  refused & unanswerable / refused, ``answerable_rec`` = answered & answerable / answerable,
  ``answerable_prec`` = answered & answerable / answered, their F1s, ``macro_avg`` (mean of the two
  recalls) and ``macro_f1`` (mean of the two F1s);
- exact match (the response contains a gold short answer after SQuAD normalisation): ``regular_em`` over
  all cases with gold answers, ``answered_em`` over the answered ones, ``calib_answered_em`` (EM_alpha:
  EM of answered & answerable cases / answered), ``calib_answerable_em`` (EM_beta: ... / answerable),
  their F1 ``calib_em_f1``, and ``parametric_answered_em`` (EM of answered but unanswerable cases);
- citations (ALCE/Trust-Eval): the response is split into statements (sentences); a statement's
  citation recall is 1 when the passages it cites, together, entail it (judge score >= ``threshold``), 0
  otherwise (also when it cites nothing); a citation is precise when the statement is supported and the
  cited passage alone entails it or the others without it do not. A response's recall is the mean over
  its statements, its precision the share of its citations that are precise. ``regular_citation_*``
  average over every case, ``answered_citation_*`` over answered ones; responses without any ``[n]``
  marker score 0, as in Trust-Eval. Computed only when at least one response has a marker.
- ``trust_score`` = mean of macro_f1, calib_em_f1 and answered_citation_f1, over the parts available.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from pipeline.alternatives import contains_normalised
from pipeline.citations import read_citations
from pipeline.judges.base import Judge, Premise
from schemas.interaction import Passage
from schemas.results import JudgeCall
from schemas.settings import SplitSettings


class TrustEvalCase(BaseModel):
    answer: str
    refused: bool
    answerable: bool | None = None
    gold_answers: list[str] = Field(default_factory=list)
    passages: list[str] = Field(default_factory=list)


class TrustEvalResult(BaseModel):
    num_samples: int
    answered_num: int
    answerable_num: int  # among cases whose answerability is known
    overlapped_num: int  # answered and answerable
    answered_ratio: float | None
    regular_length: float | None  # mean characters of all responses
    answered_length: float | None  # mean characters of non-refusals
    reject_rec: float | None = None
    reject_prec: float | None = None
    reject_f1: float | None = None
    answerable_rec: float | None = None
    answerable_prec: float | None = None
    answerable_f1: float | None = None
    macro_avg: float | None = None
    macro_f1: float | None = None
    em_cases: int = 0
    regular_em: float | None = None
    answered_em: float | None = None
    calib_answered_em: float | None = None
    calib_answerable_em: float | None = None
    calib_em_f1: float | None = None
    parametric_answered_em: float | None = None
    cited_cases: int = 0
    regular_citation_rec: float | None = None
    regular_citation_prec: float | None = None
    regular_citation_f1: float | None = None
    answered_citation_rec: float | None = None
    answered_citation_prec: float | None = None
    answered_citation_f1: float | None = None
    trust_score: float | None = None
    calls: list[JudgeCall] = Field(default_factory=list, exclude=True)


def exact_match(response: str, gold_answers: Sequence[str]) -> bool:
    """Trust-Eval's exact match: the response contains a gold answer as whole words, both normalised
    as SQuAD's script does (``pipeline.alternatives.squad_normalise``, punctuation dropped)."""
    return any(contains_normalised(response, g, split_on_punctuation=False) for g in gold_answers)


def _ratio(num: int | float, den: int | float) -> float | None:
    return num / den if den else None


def f1(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r else 0.0


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


#: Trust-Eval's statements are the response's sentences as written: none is joined to the next
_STATEMENTS = SplitSettings(min_sentence_chars=0)


def split_cited_statements(answer: str, passages: Sequence[str] = ()) -> list[tuple[str, list[int]]]:
    """Sentences of a response, markers removed, each with the 1-based passage numbers it cites
    (``pipeline.citations``: ``[n]`` and the other marker styles); a reference to no passage is 0."""
    evidence = [Passage(text=p) for p in passages]
    sentences, cited = read_citations(answer, [], evidence, _STATEMENTS, max_markers=10_000)
    return [
        (text, [i + 1 for i in c.passages] + [0] * len(c.dangling))
        for text, c in zip(sentences, cited.sentences, strict=True)
    ]


class CitationScorer:
    """Citation recall and precision of one response, with a judge's entailment."""

    def __init__(self, judge: Judge, threshold: float = 0.5) -> None:
        self.judge = judge
        self.threshold = threshold
        self.calls: list[JudgeCall] = []

    async def _supports(self, passages: Sequence[str], statement: str) -> bool:
        if not passages:
            return False
        out = await self.judge.entail(Premise("\n\n".join(passages)), [statement])
        self.calls.extend(out.calls)
        return out.value.hypotheses[0].score >= self.threshold

    async def score(self, answer: str, passages: Sequence[str]) -> tuple[float, float]:
        """(recall, precision) of the response's citations; (0, 0) when it cites nothing."""
        statements = split_cited_statements(answer, passages)
        if not statements or not any(c for _, c in statements):
            return 0.0, 0.0
        recalls: list[float] = []
        precise = total = 0
        for text, cited in statements:
            valid = [n for n in cited if 1 <= n <= len(passages)]
            total += len(cited)
            chosen = [passages[n - 1] for n in valid]
            supported = await self._supports(chosen, text)
            recalls.append(1.0 if supported else 0.0)
            if not supported:
                continue
            for n in valid:
                alone = await self._supports([passages[n - 1]], text)
                if alone:
                    precise += 1
                    continue
                others = [passages[m - 1] for m in valid if m != n]
                if not await self._supports(others, text):
                    precise += 1
        return sum(recalls) / len(recalls), (precise / total if total else 0.0)


def _refusal_figures(result: TrustEvalResult, cases: Sequence[TrustEvalCase]) -> None:
    """Refusal and answerability recall, precision and F1 over the cases with a known answerability."""
    known = [c for c in cases if c.answerable is not None]
    if not known:
        return
    answerable = [c for c in known if c.answerable]
    unanswerable = [c for c in known if not c.answerable]
    known_answered = [c for c in known if not c.refused]
    known_refused = [c for c in known if c.refused]
    overlapped = [c for c in answerable if not c.refused]
    result.reject_rec = _ratio(sum(1 for c in unanswerable if c.refused), len(unanswerable))
    result.reject_prec = _ratio(sum(1 for c in known_refused if not c.answerable), len(known_refused))
    result.reject_f1 = f1(result.reject_prec, result.reject_rec)
    result.answerable_rec = _ratio(len(overlapped), len(answerable))
    result.answerable_prec = _ratio(len(overlapped), len(known_answered))
    result.answerable_f1 = f1(result.answerable_prec, result.answerable_rec)
    recs = [r for r in (result.reject_rec, result.answerable_rec) if r is not None]
    f1s = [r for r in (result.reject_f1, result.answerable_f1) if r is not None]
    result.macro_avg = _mean(recs)
    result.macro_f1 = _mean(f1s)


def _exact_match_figures(result: TrustEvalResult, cases: Sequence[TrustEvalCase]) -> None:
    """Exact match against the gold answers, overall, answered, and calibrated by answerability."""
    with_gold = [c for c in cases if c.gold_answers]
    result.em_cases = len(with_gold)
    if not with_gold:
        return
    em = {id(c): exact_match(c.answer, c.gold_answers) for c in with_gold}
    gold_answered = [c for c in with_gold if not c.refused]
    result.regular_em = _mean([float(em[id(c)]) for c in with_gold])
    result.answered_em = _mean([float(em[id(c)]) for c in gold_answered])
    gold_known_answered = [c for c in gold_answered if c.answerable is not None]
    gold_answerable = [c for c in with_gold if c.answerable]
    calib_hits = sum(1 for c in gold_answered if c.answerable and em[id(c)])
    result.calib_answered_em = _ratio(calib_hits, len(gold_known_answered))
    result.calib_answerable_em = _ratio(calib_hits, len(gold_answerable))
    result.calib_em_f1 = f1(result.calib_answered_em, result.calib_answerable_em)
    parametric = [c for c in gold_answered if c.answerable is False]
    result.parametric_answered_em = _mean([float(em[id(c)]) for c in parametric])


async def _citation_figures(
    result: TrustEvalResult, cases: Sequence[TrustEvalCase], judge: Judge, threshold: float
) -> None:
    """Citation recall, precision and F1 (the judge checks each cited sentence against its passages)."""
    scorer = CitationScorer(judge, threshold)
    scores: list[tuple[float, float, bool]] = []
    for c in cases:
        rec, prec = await scorer.score(c.answer, c.passages)
        scores.append((rec, prec, not c.refused))
    result.regular_citation_rec = _mean([s[0] for s in scores])
    result.regular_citation_prec = _mean([s[1] for s in scores])
    result.regular_citation_f1 = f1(result.regular_citation_prec, result.regular_citation_rec)
    result.answered_citation_rec = _mean([s[0] for s in scores if s[2]])
    result.answered_citation_prec = _mean([s[1] for s in scores if s[2]])
    result.answered_citation_f1 = f1(result.answered_citation_prec, result.answered_citation_rec)
    result.calls = scorer.calls


async def trust_eval(
    cases: Sequence[TrustEvalCase], judge: Judge | None = None, threshold: float = 0.5
) -> TrustEvalResult:
    """Trust-Eval metrics over the cases; citation figures need a judge and at least one ``[n]`` marker."""
    n = len(cases)
    answered = [c for c in cases if not c.refused]
    known = [c for c in cases if c.answerable is not None]
    answerable = [c for c in known if c.answerable]
    result = TrustEvalResult(
        num_samples=n,
        answered_num=len(answered),
        answerable_num=len(answerable),
        overlapped_num=len([c for c in answerable if not c.refused]),
        answered_ratio=_ratio(len(answered), n),
        regular_length=_mean([len(c.answer) for c in cases]),
        answered_length=_mean([len(c.answer) for c in answered]),
    )
    _refusal_figures(result, cases)
    _exact_match_figures(result, cases)
    cited = [c for c in cases if any(n for _, n in split_cited_statements(c.answer, c.passages))]
    result.cited_cases = len(cited)
    if cited and judge is not None:
        await _citation_figures(result, cases, judge, threshold)
    parts = [v for v in (result.macro_f1, result.calib_em_f1, result.answered_citation_f1) if v is not None]
    result.trust_score = _mean(parts)
    return result
