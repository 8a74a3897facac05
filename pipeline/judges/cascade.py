"""CascadeJudge (judge kind ``cascade``): the lexical judge first, the LLM only where it is unsure.

Entailment: every hypothesis goes to the lexical judge; those whose lexical score lies within the
unsure band (inclusive) are sent, in one batched call with one copy of the premise, to the LLM judge,
whose verdicts replace the lexical ones. Outside that band the lexical verdict is trusted (a clear match,
or a clear miss such as an absent number). Only the NLI pairs in ``cascade_llm_pairs`` go to the LLM at
all (by default ``answer_ground_truth``: does the answer hold the ground truth, the correctness score
measured on NQ301); the band depends on the pair: the context (``[cascade_unsure_low,
cascade_unsure_high]``) or a ground-truth pair (``[cascade_ground_truth_unsure_low,
cascade_ground_truth_unsure_high]``).

Refusals: a text the lexical phrase detector flags is a refusal without asking; the rest go to the LLM
in one call when ``llm_refusals`` is True (the default), else they are "not a refusal".

Pronouns: the LLM, with the conversation's earlier turns (a lexical judge cannot resolve pronouns).

The calls of both judges are returned, so the Evaluation shows how many reached the LLM.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.judges.base import Judge, JudgeOutput, NliOutput, Premise
from prompts.models import PronounTurn
from schemas.errors import JudgeError
from schemas.results import HypothesisResult, JudgeCall
from schemas.settings import JudgeSettings


class CascadeJudge:
    name = "cascade"

    def __init__(
        self, lexical: Judge, llm: Judge, settings: JudgeSettings, *, llm_refusals: bool = True
    ) -> None:
        self.lexical = lexical
        self.llm = llm
        ground_truth_band = (
            settings.cascade_ground_truth_unsure_low,
            settings.cascade_ground_truth_unsure_high,
        )
        self.bands: dict[str, tuple[float, float]] = {
            "context_answer": (settings.cascade_unsure_low, settings.cascade_unsure_high),
            "ground_truth_answer": ground_truth_band,
            "answer_ground_truth": ground_truth_band,
        }
        self.llm_pairs = frozenset(settings.cascade_llm_pairs)
        self.llm_refusals = llm_refusals
        self.model = f"{lexical.model}+{llm.model}"

    def unsure(self, score: float, pair: str = "context_answer") -> bool:
        """True when the LLM decides: the pair is one the LLM judges and the lexical score is inside
        its band."""
        low, high = self.bands[pair]
        return pair in self.llm_pairs and low <= score <= high

    async def replace_pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> JudgeOutput[list[str]]:
        return await self.llm.replace_pronouns(sentences, history)

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        first = await self.lexical.entail(premise, hypotheses, ask_refusal=ask_refusal)
        calls: list[JudgeCall] = list(first.calls)
        results: list[HypothesisResult] = list(first.value.hypotheses)
        refusal = first.value.refusal
        ask = [i for i, r in enumerate(results) if self.unsure(r.score, premise.pair)]
        # in "same" mode the LLM is asked about refusal only when the lexical phrases found none
        ask_llm_refusal = ask_refusal and not refusal and self.llm_refusals
        if ask:
            second = await self.llm.entail(premise, [hypotheses[i] for i in ask], ask_refusal=ask_llm_refusal)
            calls.extend(second.calls)
            if len(second.value.hypotheses) != len(ask):
                raise JudgeError(
                    f"the LLM judge gave {len(second.value.hypotheses)} verdicts for {len(ask)} hypotheses"
                )
            for i, result in zip(ask, second.value.hypotheses, strict=True):
                results[i] = result
            if ask_llm_refusal:
                refusal = second.value.refusal
        elif ask_llm_refusal:
            flags = await self.llm.classify_refusals([" ".join(hypotheses)])
            calls.extend(flags.calls)
            refusal = flags.value[0] if flags.value else None
        return JudgeOutput(NliOutput(results, refusal), calls)

    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        first = await self.lexical.classify_refusals(texts)
        calls = list(first.calls)
        flags = list(first.value)
        rest = [i for i, flag in enumerate(flags) if not flag]
        if rest and self.llm_refusals:
            second = await self.llm.classify_refusals([texts[i] for i in rest])
            calls.extend(second.calls)
            if len(second.value) != len(rest):
                raise JudgeError(
                    f"the LLM judge returned {len(second.value)} refusal flags for {len(rest)} texts"
                )
            for i, flag in zip(rest, second.value, strict=True):
                flags[i] = flag
        return JudgeOutput(flags, calls)

    async def aclose(self) -> None:
        try:
            await self.llm.aclose()
        finally:
            await self.lexical.aclose()
