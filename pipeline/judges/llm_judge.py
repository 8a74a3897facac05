"""LLMJudge: the Judge protocol over prompts/ and JudgeClient (any OpenAI-compatible endpoint).

A premise of two or more passages is shown numbered and the answer names each statement's passage
(``StatementAnswer.passage``); over one passage every statement is judged against it; an id the
premise lacks, or none, is recorded as None (``StatementVerdict.passage``). With ``Premise.ask_support``
(an answer that cites) the same prompt asks which passages support each statement (its ``support``
section), recorded as positions in ``StatementVerdict.supported_by`` (over one passage: that passage
when the statement is entailed); the verdicts are cached under a key of their own.

The same class serves the ``openai`` judge and the ``local`` one (pointed at the llama.cpp server
that groundwatch starts). Verdicts are cached by content (pipeline.llm.cache): NLI per
(premise, hypothesis), so a batched prompt only sends the hypotheses not seen before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import SecretStr

from pipeline.call_shares import share_calls
from pipeline.clock import Clock
from pipeline.judges.base import JudgeOutput, NliOutput, Premise
from pipeline.llm.cache import VerdictCache, cache_key, open_cache
from pipeline.llm.client import FormatMode, JudgeClient
from pipeline.llm.verdict_probs import TokenLogprob, graded_scores
from pipeline.refusal_phrases import REFUSAL_OFF, refusal_match
from prompts import (
    HypothesisAnswer,
    NliAnswer,
    NliCase,
    NliCasesAnswer,
    NliRefusalAnswer,
    Prompts,
    PronounsAnswer,
    PronounTurn,
    RefusalAnswer,
    StatementAnswer,
)
from schemas.results import VERDICT_SCORE, HypothesisResult, JudgeCall, Stage, StatementVerdict
from schemas.settings import JudgeSettings


def _expect_ids(ids: Sequence[int], n: int, what: str) -> None:
    if sorted(ids) != list(range(1, n + 1)):
        raise ValueError(f"expected {what} ids 1..{n}, got {list(ids)}")


def answer_passage(passage: int | None, passages: int) -> int | None:
    """A statement's passage as a position in the premise's passages: the answer's id (1-based) when the
    premise numbered ``passages`` (two or more) and has it; 0 when the premise is one passage; else None."""
    if passages == 1:
        return 0
    if passage is None or not 1 <= passage <= passages:
        return None
    return passage - 1


def answer_support(statement: StatementAnswer, passages: int, asked: bool) -> list[int] | None:
    """A statement's supporting passages as positions in the premise's passages: the answer's ids
    (1-based) the premise has, when asked and the premise numbered two or more; over one passage, that
    passage when the statement is entailed; None when not asked (or the judge left them out)."""
    if not asked or passages < 1:
        return None
    if passages == 1:
        return [0] if statement.verdict == "entailed" else []
    if statement.supported_by is None:
        return None
    return list(dict.fromkeys(i - 1 for i in statement.supported_by if 1 <= i <= passages))


def hypothesis_result(
    hypothesis: str,
    statements: Sequence[StatementAnswer],
    grades: Sequence[float | None] = (),
    passages: int = 0,
    support: bool = False,
) -> HypothesisResult:
    """Scores from VERDICT_SCORE, or the statement's graded score where ``grades`` has one (see
    ``statement_grades``); hypothesis score = mean; no statement = one not_stated statement, with no
    passage. ``passages``: how many the premise held (``answer_passage``); ``support``: whether the
    supporting passages were asked (``answer_support``)."""
    given = bool(statements)
    if not statements:
        statements = [
            StatementAnswer(
                statement=hypothesis, reason="the judge gave no statement", verdict="not_stated", tag="claim"
            )
        ]
    verdicts = [
        StatementVerdict(
            statement=s.statement,
            verdict=s.verdict,
            reason=s.reason,
            tag=s.tag,
            score=grade
            if (grade := grades[k] if k < len(grades) else None) is not None
            else VERDICT_SCORE[s.verdict],
            passage=answer_passage(s.passage, passages) if given else None,
            supported_by=answer_support(s, passages, support) if given else ([] if support else None),
        )
        for k, s in enumerate(statements)
    ]
    return HypothesisResult(
        hypothesis=hypothesis, statements=verdicts, score=sum(v.score for v in verdicts) / len(verdicts)
    )


def statement_grades(
    hypotheses: Sequence[Sequence[StatementAnswer]], tokens: Sequence[TokenLogprob]
) -> list[list[float | None]]:
    """Graded scores of the statements of ``hypotheses`` (in the order the answer's JSON holds them) from
    the answer's tokens; None where the tokens give no distribution (pipeline.llm.verdict_probs)."""
    count = sum(len(h) for h in hypotheses)
    flat: list[float | None] = graded_scores(tokens, count, VERDICT_SCORE) if tokens else [None] * count
    out: list[list[float | None]] = []
    for h in hypotheses:
        out.append(flat[: len(h)])
        flat = flat[len(h) :]
    return out


class LLMJudge:
    """A Judge that asks an LLM. ``name`` is "openai", or "local" for the project's own model server."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        name: str = "openai",
        base_url: str | None = None,
        model: str | None = None,
        api_key: SecretStr | None = None,
        cache: VerdictCache | None = None,
        prompts: Prompts | None = None,
        format_mode: FormatMode | None = None,
        model_id: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: the worker's clock (latencies, backoff); the system clock when not given."""
        self.name = name
        self.settings = settings
        self.client = JudgeClient(
            settings,
            judge_name=name,
            base_url=base_url,
            model=model,
            api_key=api_key,
            format_mode=format_mode,
            model_id=model_id,
            clock=clock,
        )
        # the model's identity (cache keys, JudgeCalls); the requests may name it by an alias
        self.model = self.client.model_id
        self.prompts = prompts or Prompts()
        self.cache = cache if cache is not None else open_cache(settings)
        self._versions = self.prompts.versions()
        if settings.verdict_logprobs > 0:
            # graded scores differ from the fixed ones: cached apart (``_gradeable``: an answer without
            # log-probabilities is not cached under this key)
            self._versions["nli"] = f"{self._versions['nli']}+graded"
        self._closed = False

    def __repr__(self) -> str:
        return f"LLMJudge(name={self.name!r}, client={self.client!r})"

    def _gradeable(self, tokens: Sequence[object]) -> bool:
        """Whether verdicts of this answer may be cached: with graded verdicts asked for, only when the
        server returned log-probabilities (fixed scores never sit under the graded cache key, where a
        later run with log-probabilities would take them for graded ones)."""
        return self.settings.verdict_logprobs == 0 or bool(tokens)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.client.aclose()
        if self.cache is not None:
            await self.cache.aclose()

    # ------------------------------------------------------------------ cache helpers
    def _key(self, prompt: str, *inputs: str | None) -> str:
        return cache_key(prompt, self._versions[prompt], self.model, *inputs)

    async def _get(self, keys: Sequence[str]) -> list[str | None]:
        if self.cache is None:
            return [None] * len(keys)
        return await self.cache.get_many(keys)

    async def _put(self, items: Sequence[tuple[str, str]]) -> None:
        if self.cache is not None and items:
            await self.cache.put_many(items)

    def _nli_key(self, premise: Premise, hypothesis: str) -> str:
        """Where the verdict of one hypothesis against one premise is cached; a premise shown as numbered
        passages is keyed with its passages' lengths (one text may be split into passages two ways)."""
        if len(premise.passages) < 2:
            if premise.ask_support:  # a verdict asked for supported_by differs from one not asked
                return self._key("nli", premise.text, premise.document, "support", hypothesis)
            return self._key("nli", premise.text, premise.document, hypothesis)
        lengths = ",".join(str(len(p.text)) for p in premise.passages)
        asked = "support" if premise.ask_support else "passages"  # a verdict without supported_by differs
        return self._key("nli", premise.text, premise.document, asked, lengths, hypothesis)

    def _hit_call(self, stage: Stage, items: int) -> JudgeCall:
        return JudgeCall(stage=stage, judge=self.name, model=self.model, cached=True, attempts=0, items=items)

    # ------------------------------------------------------------------ pronouns
    async def replace_pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> JudgeOutput[list[str]]:
        originals = list(sentences)
        if not originals:
            return JudgeOutput([])
        # the same sentences after other turns may resolve otherwise: the turns are part of the key
        # (JSON-encoded, so a turn never reads as a sentence); without history the key is the sentences alone
        turns = [json.dumps([t.role, t.text], ensure_ascii=False) for t in history]
        key = (
            self._key("pronouns", *originals)
            if not turns
            else self._key("pronouns", "history", *turns, "sentences", *originals)
        )
        (hit,) = await self._get([key])
        if hit is not None:
            return JudgeOutput(json.loads(hit), [self._hit_call("pronouns", len(originals))])
        answer, call = await self.client.complete(
            self.prompts.pronouns(originals, list(history)), stage="pronouns", items=len(originals)
        )
        rewritten = self._pronoun_sentences(answer, originals)
        if rewritten is None:
            return JudgeOutput(originals, [call])  # count/ids mismatch: keep the originals (not cached)
        await self._put([(key, json.dumps(rewritten))])
        return JudgeOutput(rewritten, [call])

    @staticmethod
    def _pronoun_sentences(answer: PronounsAnswer, originals: list[str]) -> list[str] | None:
        by_id = {s.id: s.text.strip() for s in answer.sentences}
        if len(answer.sentences) != len(originals) or set(by_id) != set(range(1, len(originals) + 1)):
            return None
        out = [by_id[i] for i in range(1, len(originals) + 1)]
        return None if any(not s for s in out) else out

    # ------------------------------------------------------------------ NLI
    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        hyps = list(hypotheses)
        if not hyps:
            return JudgeOutput(NliOutput(hypotheses=[], refusal=None))
        calls: list[JudgeCall] = []
        keys = [self._nli_key(premise, h) for h in hyps]
        refusal_key = self._key("nli", "refusal-of", *hyps)
        results, refusal = await self._cached_entailments(keys, refusal_key, ask_refusal)
        hits = sum(r is not None for r in results)
        if hits:
            calls.append(self._hit_call("nli", hits))
        misses = [i for i, r in enumerate(results) if r is None]
        if misses:
            call, asked_refusal = await self._ask_entailments(
                premise, hyps, misses, results, keys, refusal_key, ask_refusal
            )
            calls.append(call)
            refusal = asked_refusal if asked_refusal is not None else refusal
        done = [r for r in results if r is not None]
        if ask_refusal and self.settings.refusal_phrases_first:
            if refusal_match(" ".join(hyps), REFUSAL_OFF) is not None:
                refusal = True  # as in classify_refusals: a phrase-matched text is a refusal
        return JudgeOutput(NliOutput(hypotheses=done, refusal=refusal if ask_refusal else None), calls)

    async def _cached_entailments(
        self, keys: list[str], refusal_key: str, ask_refusal: bool
    ) -> tuple[list[HypothesisResult | None], bool | None]:
        """The cached result of each hypothesis (None: not cached) and, with ``ask_refusal``, the cached
        refusal; without a cached refusal no hypothesis counts as cached (the refusal needs the whole
        answer in the prompt)."""
        results: list[HypothesisResult | None] = [None] * len(keys)
        found = await self._get([*keys, refusal_key] if ask_refusal else keys)
        for i, hit in enumerate(found[: len(keys)]):
            if hit is not None:
                results[i] = HypothesisResult.model_validate_json(hit)
        if not ask_refusal:
            return results, None
        refusal_hit = found[-1]
        if refusal_hit is None:
            return [None] * len(keys), None
        return results, bool(json.loads(refusal_hit))

    async def _ask_entailments(
        self,
        premise: Premise,
        hyps: list[str],
        misses: list[int],
        results: list[HypothesisResult | None],
        keys: list[str],
        refusal_key: str,
        ask_refusal: bool,
    ) -> tuple[JudgeCall, bool | None]:
        """Ask the judge about the hypotheses at ``misses`` in one prompt, fill their ``results`` and
        cache them; (the call, the refusal the judge gave or None)."""
        miss_hyps = [hyps[i] for i in misses]
        prompt = self.prompts.nli(
            premise.text,
            miss_hyps,
            document=premise.document,
            ask_refusal=ask_refusal,
            passages=[p.text for p in premise.passages],
            ask_support=premise.ask_support,
        )

        def check(answer: NliAnswer) -> None:
            _expect_ids([h.id for h in answer.hypotheses], len(miss_hyps), "hypothesis")

        answer, call, tokens = await self.client.complete_graded(
            prompt,
            stage="nli",
            items=len(miss_hyps),
            check=check,
            logprobs=self.settings.verdict_logprobs,
        )
        by_id: dict[int, HypothesisAnswer] = {h.id: h for h in answer.hypotheses}
        grades = dict(
            zip(by_id, statement_grades([h.statements for h in answer.hypotheses], tokens), strict=True)
        )
        writes: list[tuple[str, str]] = []
        for j, i in enumerate(misses, 1):
            res = hypothesis_result(
                hyps[i], by_id[j].statements, grades[j], len(premise.passages), premise.ask_support
            )
            results[i] = res
            if self._gradeable(tokens):
                writes.append((keys[i], res.model_dump_json()))
        refusal: bool | None = None
        if ask_refusal and isinstance(answer, NliRefusalAnswer):
            refusal = answer.refusal
            writes.append((refusal_key, json.dumps(refusal)))
        await self._put(writes)
        return call, refusal

    async def entail_cases(
        self, cases: Sequence[tuple[Premise, Sequence[str]]]
    ) -> list[JudgeOutput[NliOutput]]:
        """Several (premise, hypotheses) cases, the hypotheses not in the cache asked in ONE prompt.

        Each case's output holds one verdict per hypothesis, in order, and its share of the call
        (``pipeline.call_shares``, weighted by the hypotheses it sent). A single case needing a call is
        asked with the one-premise prompt, exactly as ``entail`` does.
        """
        groups = [list(hyps) for _, hyps in cases]
        keys = [
            [self._nli_key(premise, h) for h in hyps]
            for (premise, _), hyps in zip(cases, groups, strict=True)
        ]
        found = await self._get([k for ks in keys for k in ks])
        results: list[list[HypothesisResult | None]] = []
        offset = 0
        for ks in keys:
            stored = found[offset : offset + len(ks)]
            offset += len(ks)
            results.append(
                [None if hit is None else HypothesisResult.model_validate_json(hit) for hit in stored]
            )
        calls: list[list[JudgeCall]] = [[] for _ in cases]
        for c, res in enumerate(results):
            hits = sum(r is not None for r in res)
            if hits:
                calls[c].append(self._hit_call("nli", hits))
        asking = [c for c, res in enumerate(results) if any(r is None for r in res)]
        if len(asking) == 1:
            (c,) = asking
            out = await self.entail(cases[c][0], groups[c])
            return [
                out
                if i == c
                else JudgeOutput(NliOutput(hypotheses=[r for r in res if r is not None]), calls[i])
                for i, res in enumerate(results)
            ]
        if asking:
            await self._ask_cases(cases, groups, keys, asking, results, calls)
        return [
            JudgeOutput(NliOutput(hypotheses=[r for r in res if r is not None]), calls[c])
            for c, res in enumerate(results)
        ]

    async def _ask_cases(
        self,
        cases: Sequence[tuple[Premise, Sequence[str]]],
        groups: list[list[str]],
        keys: list[list[str]],
        asking: list[int],
        results: list[list[HypothesisResult | None]],
        calls: list[list[JudgeCall]],
    ) -> None:
        """Ask the uncached hypotheses of the ``asking`` cases in one nli_cases prompt; fill ``results``
        and ``calls`` in place and cache the verdicts."""
        misses = {c: [i for i, r in enumerate(results[c]) if r is None] for c in asking}
        prompt_cases = [
            NliCase(
                premise=cases[c][0].text,
                hypotheses=[groups[c][i] for i in misses[c]],
                document=cases[c][0].document,
                passages=[p.text for p in cases[c][0].passages],
                ask_support=cases[c][0].ask_support,
            )
            for c in asking
        ]

        def check(answer: NliCasesAnswer) -> None:
            _expect_ids([case.id for case in answer.cases], len(prompt_cases), "case")
            for case in answer.cases:
                what = f"case {case.id} hypothesis"
                _expect_ids([h.id for h in case.hypotheses], len(prompt_cases[case.id - 1].hypotheses), what)

        sent = sum(len(m) for m in misses.values())
        answer, call, tokens = await self.client.complete_graded(
            self.prompts.nli_cases(prompt_cases),
            stage="nli",
            items=sent,
            check=check,
            logprobs=self.settings.verdict_logprobs,
        )
        by_case = {case.id: {h.id: h for h in case.hypotheses} for case in answer.cases}
        order = [(case.id, h) for case in answer.cases for h in case.hypotheses]
        flat = statement_grades([h.statements for _, h in order], tokens)
        grades = {(c, h.id): g for (c, h), g in zip(order, flat, strict=True)}
        shares = share_calls([call], [len(misses[c]) for c in asking])
        writes: list[tuple[str, str]] = []
        for n, c in enumerate(asking, 1):
            calls[c].extend(shares[n - 1])
            for j, i in enumerate(misses[c], 1):
                statements = by_case[n][j].statements
                premise = cases[c][0]
                verdict = hypothesis_result(
                    groups[c][i], statements, grades[(n, j)], len(premise.passages), premise.ask_support
                )
                results[c][i] = verdict
                if self._gradeable(tokens):
                    writes.append((keys[c][i], verdict.model_dump_json()))
        await self._put(writes)

    # ------------------------------------------------------------------ refusal
    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        """One flag per text; with ``refusal_phrases_first`` a text a refusal phrase matches is a refusal
        without asking (nor a cache entry)."""
        items = list(texts)
        flags: list[bool | None] = [None] * len(items)
        if self.settings.refusal_phrases_first:
            flags = [True if refusal_match(t, REFUSAL_OFF) is not None else None for t in items]
        keys = [self._key("refusal", t) for t in items]
        hits = 0
        for i, hit in enumerate(await self._get(keys)):
            if hit is not None and flags[i] is None:
                flags[i] = bool(json.loads(hit))
                hits += 1
        calls: list[JudgeCall] = []
        if hits:
            calls.append(self._hit_call("refusal", hits))
        misses = [i for i, f in enumerate(flags) if f is None]
        if misses:
            miss_texts = [items[i] for i in misses]

            def check(answer: RefusalAnswer) -> None:
                _expect_ids([t.id for t in answer.texts], len(miss_texts), "text")

            answer, call = await self.client.complete(
                self.prompts.refusal(miss_texts), stage="refusal", items=len(miss_texts), check=check
            )
            calls.append(call)
            by_id = {t.id: t.refusal for t in answer.texts}
            for j, i in enumerate(misses, 1):
                flags[i] = by_id[j]
            await self._put([(keys[i], json.dumps(by_id[j])) for j, i in enumerate(misses, 1)])
        return JudgeOutput([bool(f) for f in flags], calls)
