"""Citation quality of one answer, from its citations and the judge's supporting passages.

Per statement of the context pair (its hypothesis ``i`` is answer sentence ``i``, whose citations
``pipeline.citations`` read; ``schemas.citations.StatementCitations``):

- ``cited``: the evidence passages its sentence cites; ``dangling``: its references naming no passage;
- ``precise`` (citation precision, per cited passage): the passage is among the statement's supporting
  passages (``StatementVerdict.supported_by``: each passage that states it alone, or those needed
  together when only several do), so it supports the statement alone or is needed with the others;
- ``supported`` (citation recall): the cited passages support the statement: at least one of them is
  among its supporting passages. A statement only several passages support together counts as
  supported when it cites one of them (the judge names the passages, not which of them suffice).

Per interaction, over the factual statements (``pipeline.evidence.is_factual``) of an answer that cites
(at least one marker or structured citation, dangling or not; an answer without any citation has no
citation figures) and is not known to be a refusal:

- ``citation_recall``: share of the statements citing a passage whose citations support them;
- ``citation_precision``: share of their (statement, cited passage) pairs that are precise;
- ``uncited_statements``: share of the factual statements that carry no citation at all;
- ``miscited``: some statement citing a passage is not supported by what it cites (its cited passages
  together do not support it: cites the wrong passage, or states what no passage supports); False when
  every statement citing a passage is supported; None when none cites a passage or the judge named no
  supporting passages;
- ``dangling_citations``: the answer's references that name no passage, counted once per sentence;
  ``dangling_citation``: there is at least one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.evidence import is_factual
from schemas.citations import AnswerCitations, StatementCitations
from schemas.results import PairResult, StatementVerdict


@dataclass(frozen=True)
class CitationFigures:
    """The per-interaction citation figures (module docstring); all None when not defined."""

    citation_recall: float | None = None
    citation_precision: float | None = None
    uncited_statements: float | None = None
    miscited: bool | None = None
    dangling_citations: int | None = None
    dangling_citation: bool | None = None


def statement_citations(
    statement: StatementVerdict, cited: list[int], dangling: list[str]
) -> StatementCitations:
    """One statement's citations and what its supporting passages say of them."""
    support = statement.supported_by
    known = support is not None and bool(cited)
    return StatementCitations(
        cited=list(cited),
        precise=[p in (support or []) for p in cited] if known else [],
        supported=bool(set(cited) & set(support or [])) if known else None,
        dangling=list(dangling),
        factual=is_factual(statement.statement),
    )


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def check_citations(
    pair: PairResult | None, answer: AnswerCitations | None, refusal: bool | None
) -> tuple[PairResult | None, CitationFigures]:
    """The context pair with each statement's citations, and the interaction's figures (module doc).
    Unchanged, with no figures, when the answer does not cite or is a refusal; with its dangling
    citations only when the pair was not judged (no evidence at all: every reference dangles) or its
    hypotheses are not the answer's sentences one for one."""
    if answer is None or not answer.cites or refusal is True:
        return pair, CitationFigures()
    if pair is None or len(pair.hypotheses) != len(answer.sentences):
        dangling = sum(len(s.dangling) for s in answer.sentences)
        return pair, CitationFigures(dangling_citations=dangling, dangling_citation=dangling > 0)
    hypotheses = []
    checked: list[StatementCitations] = []
    for hypothesis, sentence in zip(pair.hypotheses, answer.sentences, strict=True):
        statements = []
        for statement in hypothesis.statements:
            cites = statement_citations(statement, sentence.passages, sentence.dangling)
            statements.append(statement.model_copy(update={"citations": cites}))
            checked.append(cites)
        hypotheses.append(hypothesis.model_copy(update={"statements": statements}))
    factual = [c for c in checked if c.factual]
    citing = [c for c in factual if c.cited]
    known = [c for c in citing if c.supported is not None]
    pairs = [flag for c in known for flag in c.precise]
    dangling = sum(len(s.dangling) for s in answer.sentences)
    figures = CitationFigures(
        citation_recall=_share(sum(1 for c in known if c.supported), len(known)),
        citation_precision=_share(sum(pairs), len(pairs)),
        uncited_statements=_share(sum(1 for c in factual if not c.cited and not c.dangling), len(factual)),
        miscited=any(not c.supported for c in known) if known else None,
        dangling_citations=dangling,
        dangling_citation=dangling > 0,
    )
    return pair.model_copy(update={"hypotheses": hypotheses}), figures
