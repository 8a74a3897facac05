"""The whole pipeline for one interaction: stages, concurrency, modes, stage errors."""

from __future__ import annotations

import asyncio
import re

import pytest

from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from schemas.errors import JudgeError, StageError
from schemas.interaction import Interaction
from tests.settings_factory import make_settings
from tests.unit.scripted_judge import ScriptedJudge

CONTEXT = "The reset button restores factory settings. The router has four ports."


def interaction(i: int, answer: str, ground_truth: str | None = None) -> Interaction:
    return Interaction(
        interaction_id=f"e{i}",
        question="I own the router. What does the reset button do?",
        contexts=[{"text": CONTEXT, "document": "manual.pdf"}],
        answer=answer,
        ground_truth=ground_truth,
    )


class OverlapScorer:
    """Relevance by word overlap (Jaccard), standing in for the embedding scorer."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def score(self, question: str, answer: str) -> float:
        self.seen.append((question, answer))
        q, a = set(re.findall(r"\w+", question.lower())), set(re.findall(r"\w+", answer.lower()))
        return len(q & a) / len(q | a)


async def test_evaluate_runs_every_stage() -> None:
    judge = ScriptedJudge(pronouns={"It": "The router"})
    scorer = OverlapScorer()
    settings = make_settings()
    settings = settings.with_changes(
        pipeline={"hallucination_threshold": 0.5}
    )  # set: not the lexical kind's cross-validated 0.81
    evaluator = Evaluator(judge, settings, relevance_scorer=scorer)
    answer = "The reset button restores factory settings. It also has nine ethernet ports."
    ev = await evaluator.evaluate(interaction(1, answer, "The reset button restores factory settings."))
    assert judge.pronoun_calls and judge.entail_calls
    assert judge.refusal_calls == []  # no refusal cue in either text: not refusals, no call
    assert ev.pairs[0].hypotheses[1].hypothesis == "The router also has nine ethernet ports."
    assert ev.context_entailment == pytest.approx(0.5)
    assert ev.hallucination is False
    assert ev.answer_refusal is False and ev.ground_truth_refusal is False
    assert ev.unsupported_claims == ["The router also has nine ethernet ports."]
    assert ev.relevance is not None and 0 < ev.relevance < 1
    assert scorer.seen == [("I own the router. What does the reset button do?", answer)]
    assert set(ev.stage_seconds) == {"convert", "nli", "refusal", "relevance"}
    # pronouns: the answer only (a one-sentence ground truth has nothing to resolve from); NLI: the
    # context pair and the ground-truth pair (the unchanged ground truth is inside the answer: exact match)
    assert ev.judge_calls == len(ev.calls) == 1 + 2
    assert ev.complete


async def test_concurrent_evaluations_share_refusal_prompts() -> None:
    judge = ScriptedJudge()
    evaluator = Evaluator(judge, make_settings())
    answers = [f"The reset button does not restore factory settings number {i}." for i in range(5)]
    evs = await asyncio.gather(
        *(
            evaluator.evaluate(interaction(i, a, "Factory settings are not restored."))
            for i, a in enumerate(answers)
        )
    )
    assert sorted(len(c) for c in judge.refusal_calls) == [2, 8]
    refusal_records = [c for ev in evs for c in ev.calls if c.stage == "refusal"]
    assert sum(1 for c in refusal_records if c.attempts > 0) == 2
    assert [ev.interaction_id for ev in evs] == [f"e{i}" for i in range(5)]
    await evaluator.aclose()


async def test_same_mode_makes_no_refusal_calls() -> None:
    judge = ScriptedJudge()
    settings = make_settings()
    settings = settings.with_changes(pipeline={"refusal_mode": "same"})
    ev = await Evaluator(judge, settings).evaluate(interaction(1, "I don't know what the button does."))
    assert judge.refusal_calls == []
    assert ev.answer_refusal is True
    assert ev.hallucination is None
    assert ev.complete and "refusal" not in ev.stage_seconds


@pytest.mark.parametrize(
    ("method", "stage"),
    [("replace_pronouns", "convert"), ("entail", "nli"), ("classify_refusals", "refusal")],
)
async def test_stage_errors_name_the_stage(method: str, stage: str) -> None:
    judge = ScriptedJudge(fail={method})
    with pytest.raises(StageError) as info:
        await Evaluator(judge, make_settings()).evaluate(
            interaction(1, "The reset button restores factory settings. It has no network ports.")
        )
    assert info.value.stage == stage
    assert isinstance(info.value, JudgeError)
    assert str(info.value).startswith(f"{stage}: ")


async def test_with_the_lexical_judge() -> None:
    evaluator = Evaluator(LexicalJudge(), make_settings())
    grounded = await evaluator.evaluate(interaction(1, "The reset button restores factory settings."))
    made_up = await evaluator.evaluate(
        interaction(2, "Pressing it orders a pizza from Napoli in 30 minutes.")
    )
    assert grounded.context_entailment is not None and made_up.context_entailment is not None
    assert grounded.context_entailment > made_up.context_entailment
    assert grounded.judge == "lexical"
