"""Re-asks and self-contradictions of a closing conversation, by the LLM judge (``conversations.judge`` llm).

The lexical rules (pipeline.conversations) first pick the pairs worth a look (``candidates``): pairs of
user turns, and pairs of answers, whose content words share ``judge_candidate_similarity`` (Jaccard) or
that the lexical rule flags, at most ``judge_max_pairs`` of each kind per conversation, the most similar
first. Then, in at most one call per kind:

- **re-ask**: the pairs of user turns go to prompts/reask.md ("does the later message ask again what the
  earlier asked?");
- **contradiction**: the pairs of answers go to the NLI judge (prompts/nli_cases.md), one case per pair,
  the earlier answer the premise and the later the hypothesis; the later contradicts the earlier when a
  statement of it is "contradicted".

A pair not sent keeps its lexical verdict (beyond the cap; below the pre-filter that is negative). Each pair's
verdict is cached (the judge's verdict cache, keyed by the prompt's version, the model and the two
texts), so a conversation reopened by a late turn pays only for its new pairs. The calls go through the
judge's ``JudgeClient`` (retries, in-flight slots at the priority of stage ``conversation``, cost). When
a call fails, or with "llm" and no LLM judge, that kind keeps its lexical verdicts and ``failure`` says
why; a conversation is never left unrolled by it, nor waits more than ``judge_timeout_s`` for it (the
two calls run together; past it, both kinds keep their lexical verdicts). Each turn is cut to
``MAX_TEXT_CHARS``; under ``privacy.mode`` judge, each text is masked before it is sent (``mask``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pipeline.conversations import (
    CONTRADICTIONS,
    REASKS,
    ConversationKey,
    Pair,
    PairVerdicts,
    candidates,
    contradiction_verdicts,
    conversations_of,
    flagged,
    reask_verdicts,
)
from pipeline.custom_evaluators import llm_of
from pipeline.judges.base import Judge
from pipeline.llm.cache import cache_key
from prompts import NliCase, NliCasesAnswer, Prompts, ReaskAnswer, ReaskInput, ReaskPair
from schemas.conversation import ConversationTurn
from schemas.evaluation import Evaluation
from schemas.results import JudgeCall
from schemas.settings import ConversationSettings

log = logging.getLogger(__name__)

#: the two texts of each pair as the judge sees them (cut, masked)
Shown = dict[Pair, tuple[str, str]]

#: characters of each user turn or answer shown to the judge
MAX_TEXT_CHARS = 4000
REASON_CHARS = 200
NO_LLM = "no LLM judge: conversations.judge llm needs judge.kind openai, local or cascade"


@dataclass
class _Kind:
    """One kind of check over a conversation: its lexical verdicts, the pairs sent, what came back."""

    verdicts: dict[Pair, bool]
    failure: str = ""
    calls: list[JudgeCall] = field(default_factory=list)


def _ids(count: int, ids: list[int]) -> None:
    if sorted(ids) != list(range(1, count + 1)):
        raise ValueError(f"expected one verdict for each of ids 1 to {count}, got ids {sorted(ids)}")


class ConversationJudge:
    """The LLM judge's re-ask and contradiction verdicts for a closing conversation (module docstring).
    False (nothing to do) with ``conversations.judge`` "lexical"."""

    def __init__(
        self,
        judge: Judge | None,
        settings: ConversationSettings,
        prompts: Prompts | None = None,
        mask: Callable[[str], str] | None = None,
    ) -> None:
        self.settings = settings
        self.on = settings.judge == "llm"
        self.llm = llm_of(judge) if self.on else None
        self.prompts = (prompts or Prompts()) if self.llm is not None else None
        self.mask = mask or (lambda text: text)

    def __bool__(self) -> bool:
        return self.on

    async def review(self, turns: Sequence[ConversationTurn], *, spent: str | None = None) -> PairVerdicts:
        """The verdicts for ``turns`` (in conversation order: ``pipeline.conversations.in_order``) and
        what they cost. ``spent``: the app's judge budget is spent (its skip reason, ``budget:...``), so
        the lexical verdicts stand and no call is made. Never raises (a cancellation goes through)."""
        questions = [t.question for t in turns]
        answers = [t.answer for t in turns]
        s = self.settings
        # every pair of turns: CPU work that grows with the square of a conversation's length, in a thread
        reasked, contradicted = await asyncio.to_thread(
            lambda: (reask_verdicts(questions, s.reask_similarity), contradiction_verdicts(answers))
        )
        reask, contra = _Kind(reasked), _Kind(contradicted)
        by_llm: tuple[str, ...] = ()
        if spent is not None:
            reask.failure = f"the app's judge budget is spent ({spent})"
        elif self.llm is None or self.prompts is None:
            reask.failure = NO_LLM
        else:
            floor, cap = s.judge_candidate_similarity, s.judge_max_pairs
            lexical = (dict(reask.verdicts), dict(contra.verdicts))
            asked, answered = await asyncio.to_thread(
                lambda: (
                    candidates(questions, floor, reask.verdicts, cap),
                    candidates(answers, floor, contra.verdicts, cap),
                )
            )
            try:
                async with asyncio.timeout(s.judge_timeout_s):
                    await asyncio.gather(
                        self._reasks(questions, asked, reask), self._contradictions(answers, answered, contra)
                    )
            except TimeoutError:
                for kind, before in zip((reask, contra), lexical, strict=True):
                    kind.verdicts = before
                    kind.failure = f"the judge took more than {s.judge_timeout_s:g} s"
            kinds = ((REASKS, reask), (CONTRADICTIONS, contra))
            by_llm = tuple(name for name, kind in kinds if not kind.failure)
        calls = [c for c in reask.calls + contra.calls if not c.cached]
        return PairVerdicts(
            reasked=flagged(len(turns), reask.verdicts),
            contradicted=flagged(len(turns), contra.verdicts),
            calls=len(calls),
            input_tokens=sum(c.input_tokens for c in calls),
            output_tokens=sum(c.output_tokens for c in calls),
            cost_usd=sum(c.cost_usd for c in calls),
            failure="; ".join(f for f in (reask.failure, contra.failure) if f),
            by_llm=by_llm,
        )

    def _text(self, text: str) -> str:
        return self.mask(text[:MAX_TEXT_CHARS])

    async def _reasks(self, questions: Sequence[str], pairs: list[Pair], kind: _Kind) -> None:
        if self.llm is None or self.prompts is None:
            return
        client, prompts = self.llm[0], self.prompts

        async def ask(todo: list[Pair], shown: Shown) -> tuple[dict[Pair, bool], JudgeCall]:
            inp = ReaskInput(pairs=[ReaskPair(earlier=shown[p][0], later=shown[p][1]) for p in todo])
            answer: ReaskAnswer
            answer, call = await client.complete(
                prompts.reask(inp), stage="conversation", items=len(todo),
                check=lambda a: _ids(len(todo), [v.id for v in a.pairs]),
            )  # fmt: skip
            by_id = {v.id: v.reasked for v in answer.pairs}
            return {p: by_id[i] for i, p in enumerate(todo, 1)}, call

        await self._judge("reask", prompts.versions()["reask"], questions, pairs, ask, kind)

    async def _contradictions(self, answers: Sequence[str], pairs: list[Pair], kind: _Kind) -> None:
        if self.llm is None or self.prompts is None:
            return
        client, prompts = self.llm[0], self.prompts

        async def ask(todo: list[Pair], shown: Shown) -> tuple[dict[Pair, bool], JudgeCall]:
            cases = [NliCase(premise=shown[p][0], hypotheses=[shown[p][1]]) for p in todo]

            def check(a: NliCasesAnswer) -> None:
                _ids(len(todo), [c.id for c in a.cases])
                for c in a.cases:
                    _ids(1, [h.id for h in c.hypotheses])

            answer: NliCasesAnswer
            answer, call = await client.complete(
                prompts.nli_cases(cases), stage="conversation", items=len(todo), check=check
            )
            by_id = {
                c.id: any(s.verdict == "contradicted" for h in c.hypotheses for s in h.statements)
                for c in answer.cases
            }
            return {p: by_id[i] for i, p in enumerate(todo, 1)}, call

        version = prompts.versions()["nli_cases"]
        await self._judge("conversation_contradiction", version, answers, pairs, ask, kind)

    async def _judge(
        self,
        name: str,
        version: str,
        texts: Sequence[str],
        pairs: list[Pair],
        ask: Callable[[list[Pair], Shown], Awaitable[tuple[dict[Pair, bool], JudgeCall]]],
        kind: _Kind,
    ) -> None:
        """The verdicts of ``pairs`` of ``texts`` into ``kind``: from the cache, the rest in one call."""
        if not pairs or self.llm is None:
            return
        client, cache, model = self.llm
        try:
            shown: Shown = {p: (self._text(texts[p[0]]), self._text(texts[p[1]])) for p in pairs}
            keys = {p: cache_key(name, version, model, *two) for p, two in shown.items()}
            hits = await cache.get_many(list(keys.values())) if cache is not None else [None] * len(keys)
            found: dict[Pair, bool] = {}
            for p, hit in zip(keys, hits, strict=True):
                if hit is not None:
                    found[p] = bool(json.loads(hit)["v"])
            if found:
                kind.calls.append(JudgeCall(
                    stage="conversation", judge=client.judge_name, model=model, cached=True, attempts=0,
                    items=len(found),
                ))  # fmt: skip
            todo = [p for p in shown if p not in found]
            if todo:
                answered, call = await ask(todo, shown)
                kind.calls.append(call)
                found.update(answered)
                if cache is not None:
                    await cache.put_many([(keys[p], json.dumps({"v": answered[p]})) for p in todo])
        except Exception as exc:  # the lexical verdicts stand; the conversation is rolled up regardless
            log.warning("conversation judge (%s) failed: %r", name, exc)
            kind.failure = f"{name}: {type(exc).__name__}: {exc}"[:REASON_CHARS]
            return
        kind.verdicts.update(found)  # the pairs not shown keep the lexical verdict (negative below the floor)


async def judge_conversations(
    judge: ConversationJudge, evaluations: Sequence[Evaluation]
) -> dict[ConversationKey, PairVerdicts]:
    """The LLM judge's verdicts for every conversation of these evaluations (``groundwatch eval``), by
    conversation; {} when the judge is off."""
    if not judge:
        return {}
    found = conversations_of(evaluations)
    verdicts = await asyncio.gather(*(judge.review(turns) for turns in found.values()))
    return dict(zip(found, verdicts, strict=True))
