"""Fused topology: a relevance failure marks relevance missing (as the staged join does), never the row."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from schemas.interaction import Interaction
from streams.processors.evaluate import score_relevance, with_relevance
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


async def test_relevance_failure_is_missing_not_a_dead_letter() -> None:
    settings = make_settings()
    evaluator = Evaluator(LexicalJudge(), settings)  # the fused processor's: no scorer inside
    try:
        evaluation = await evaluator.evaluate(INTERACTION)
    finally:
        await evaluator.aclose()
    assert evaluation.complete
    ok = with_relevance(evaluation, *await score_relevance(Scorer(fail=False), INTERACTION))
    assert ok.relevance == 0.75 and ok.complete and "relevance" in ok.stage_seconds
    failed = with_relevance(evaluation, *await score_relevance(Scorer(fail=True), INTERACTION))
    assert failed.relevance is None and not failed.complete and failed.missing == ["relevance"]
    assert failed.context_entailment == evaluation.context_entailment  # the row itself is kept
