"""A deterministic test double of the judge I/O boundary (the ``Judge`` protocol), for stage tests.

It records every call, and answers by simple, visible rules:

- ``replace_pronouns``: applies ``pronouns`` (a word -> replacement map) to each sentence; with
  ``pronoun_count_delta`` it returns that many sentences more (or fewer) than given.
- ``entail``: a hypothesis is split into statements on ``" and "``; a statement is entailed when
  each of its words (lower-cased, stripped of punctuation) occurs in the premise, contradicted when
  it contains a word listed in ``contradict``, else not stated. ``verdicts`` (statement -> verdict)
  overrides the rule, ``partial`` (statement -> score) gives partial credit. With ``ask_refusal`` the
  refusal flag says whether the first hypothesis contains a refusal phrase.
- ``classify_refusals``: a text is a refusal when it contains a refusal phrase.
- ``fail`` names methods that raise ``JudgeError``; ``wrong_counts`` names methods that return one
  result too few.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.judges.base import JudgeOutput, NliOutput, Premise
from prompts.models import PronounTurn
from schemas.errors import JudgeError
from schemas.results import VERDICT_SCORE, HypothesisResult, JudgeCall, StatementVerdict

REFUSAL_PHRASES = ("i don't know", "i cannot", "i can't", "no information")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@dataclass
class ScriptedJudge:
    name: str = "scripted"
    model: str = "scripted-1"
    pronouns: dict[str, str] = field(default_factory=dict)
    pronoun_count_delta: int = 0
    contradict: set[str] = field(default_factory=set)
    verdicts: dict[str, str] = field(default_factory=dict)
    partial: dict[str, float] = field(default_factory=dict)
    fail: set[str] = field(default_factory=set)
    wrong_counts: set[str] = field(default_factory=set)
    tokens_per_call: tuple[int, int] = (100, 10)
    delay_s: float = 0.0
    pronoun_calls: list[list[str]] = field(default_factory=list)
    pronoun_histories: list[list[PronounTurn]] = field(default_factory=list)  # one per pronoun call
    entail_calls: list[tuple[Premise, list[str], bool]] = field(default_factory=list)
    refusal_calls: list[list[str]] = field(default_factory=list)
    closed: bool = False

    def _call(self, stage: str, items: int) -> JudgeCall:
        return JudgeCall(
            stage=stage,
            judge=self.name,
            model=self.model,
            input_tokens=self.tokens_per_call[0],
            output_tokens=self.tokens_per_call[1],
            latency_ms=5.0,
            cost_usd=0.001,
            items=items,
        )

    async def _pause(self) -> None:
        await asyncio.sleep(self.delay_s)

    async def replace_pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> JudgeOutput[list[str]]:
        self.pronoun_calls.append(list(sentences))
        self.pronoun_histories.append(list(history))
        await self._pause()
        if "replace_pronouns" in self.fail:
            raise JudgeError("scripted failure: replace_pronouns")
        out = []
        for sentence in sentences:
            for word, noun in self.pronouns.items():
                sentence = re.sub(rf"\b{re.escape(word)}\b", noun, sentence)
            out.append(sentence)
        if self.pronoun_count_delta > 0:
            out.extend(["extra sentence"] * self.pronoun_count_delta)
        elif self.pronoun_count_delta < 0:
            out = out[: self.pronoun_count_delta]
        return JudgeOutput(out, [self._call("pronouns", len(sentences))])

    def _statement(self, premise_words: set[str], statement: str) -> StatementVerdict:
        if statement in self.verdicts:
            verdict = self.verdicts[statement]
        elif set(_words(statement)) & self.contradict:
            verdict = "contradicted"
        elif all(w in premise_words for w in _words(statement)):
            verdict = "entailed"
        else:
            verdict = "not_stated"
        score = self.partial.get(statement, VERDICT_SCORE[verdict])
        return StatementVerdict(statement=statement, verdict=verdict, score=score, tag="claim")

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        self.entail_calls.append((premise, list(hypotheses), ask_refusal))
        await self._pause()
        if "entail" in self.fail:
            raise JudgeError("scripted failure: entail")
        words = set(_words(premise.text))
        results = []
        for hypothesis in hypotheses:
            statements = [self._statement(words, s.strip()) for s in hypothesis.split(" and ") if s.strip()]
            score = sum(s.score for s in statements) / len(statements) if statements else 0.0
            results.append(HypothesisResult(hypothesis=hypothesis, statements=statements, score=score))
        if "entail" in self.wrong_counts:
            results = results[:-1]
        refusal = None
        if ask_refusal:
            refusal = any(p in hypotheses[0].lower() for p in REFUSAL_PHRASES)
        return JudgeOutput(NliOutput(results, refusal), [self._call("nli", len(hypotheses))])

    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        self.refusal_calls.append(list(texts))
        await self._pause()
        if "classify_refusals" in self.fail:
            raise JudgeError("scripted failure: classify_refusals")
        flags = [any(p in t.lower() for p in REFUSAL_PHRASES) for t in texts]
        if "classify_refusals" in self.wrong_counts:
            flags = flags[:-1]
        return JudgeOutput(flags, [self._call("refusal", len(texts))])

    async def aclose(self) -> None:
        self.closed = True
