"""One relevance path: a relevance failure marks relevance missing, never the row, in the fused
processor's evaluator, in ``groundwatch eval`` (the same Evaluator) and in the staged join (the same
``score_relevance``); a missing extra is one line before anything is judged."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest

from pipeline.embeddings import EmbeddingsUnavailable
from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from pipeline.metrics.relevance import RelevanceScorer, score_relevance
from schemas.errors import DependencyMissing
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from tests.settings_factory import make_settings

INTERACTION = Interaction(
    interaction_id="f1", question="When does it open?", contexts=["It opens at 9 am."],
    answer="It opens at 9 am.", timestamp=datetime(2026, 1, 1, tzinfo=UTC),
)  # fmt: skip


class Scorer:
    def __init__(self, fail: bool) -> None:
        self.fail = fail

    async def score(self, question: str, answer: str) -> float:
        if self.fail:
            raise RuntimeError("embedding model missing")
        return 0.75


async def evaluate(scorer: Scorer | None) -> Evaluation:
    evaluator = Evaluator(LexicalJudge(), make_settings(), relevance_scorer=scorer)
    try:
        return await evaluator.evaluate(INTERACTION)
    finally:
        await evaluator.aclose()


async def test_relevance_failure_is_missing_not_a_dead_letter() -> None:
    plain = await evaluate(None)
    ok = await evaluate(Scorer(fail=False))
    failed = await evaluate(Scorer(fail=True))
    assert ok.relevance == 0.75 and ok.complete and "relevance" in ok.stage_seconds
    assert failed.relevance is None and not failed.complete and failed.missing == ["relevance"]
    assert failed.context_entailment == plain.context_entailment


async def test_score_relevance_reports_a_failure_without_raising() -> None:
    got = await score_relevance(Scorer(fail=True), INTERACTION)
    assert got.value is None and got.failed
    assert (await score_relevance(Scorer(fail=False), INTERACTION)).value == 0.75


def test_a_missing_extra_is_a_dependency_error_before_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(EmbeddingsUnavailable, match="embeddings") as raised:
        RelevanceScorer().require()
    assert isinstance(raised.value, DependencyMissing)
