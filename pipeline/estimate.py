"""What judging a set of interactions would take, without calling a judge (``groundwatch eval --estimate``).

The interactions go through the real ``Evaluator`` with the configured judge kind, but its LLM client is a
``DryRunClient``: every request is built exactly as it would be sent (the prompts of prompts/, the same
sentence splitting, pronoun prefilter, exact-match shortcut, NLI grouping and refusal batching of
concurrent interactions, premise splitting at the judge's window, the in-memory verdict cache) and
counted, then answered locally with a valid answer that sends the pipeline no further; with an
evaluators file, its rubrics' requests too (stage ``custom``; patterns and python evaluators call no
judge); with ``tools.argument_judge`` llm, the review of the argument values the lexical check does not
find (stage ``arguments``, one call per interaction with such values); with ``conversations.judge`` llm,
the re-ask and contradiction checks of each conversation of the file (stage ``conversation``: the pairs
the lexical pre-filter finds plausible, at most two calls a conversation). Counting:

- input tokens: the characters of the request's messages (and its ``response_format`` schema, which a
  hosted model is billed for) divided by ``pipeline.chars_per_token``, the ratio the pipeline already
  uses to fit prompts into the judge's window (3.5 by default; OpenAI's tokenizer makes about 4 characters
  a token of English, so the figure errs high by about an eighth);
- output tokens: the size, counted the same way, of a valid answer with one statement per hypothesis and a
  reason of the prompt's maximum length (15 words); a judge that splits a hypothesis into several
  statements writes more;
- cost: ``judge.prices`` of the model, as real calls are priced (a model without a price costs 0).

The verdict cache starts empty and lives in memory only (a configured ``judge.cache_path`` is neither read
nor written): a file with repeated premises and hypotheses costs less, as it would in a real first run.
With a ``Sampler`` only the interactions its rules would judge are counted (budgets, which depend on
time, are not applied).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr

from pipeline.conversation_judge import ConversationJudge
from pipeline.conversations import in_order
from pipeline.custom_evaluators import open_custom
from pipeline.evaluator import Evaluator
from pipeline.judges.base import Judge
from pipeline.llm.client import JudgeClient, price
from pipeline.llm.verdict_probs import TokenLogprob
from pipeline.sampling import Sampler
from prompts import (
    ArgumentsAnswer,
    ArgumentsInput,
    ArgumentVerdict,
    CaseAnswer,
    HypothesisAnswer,
    NliAnswer,
    NliCasesInput,
    NliInput,
    NliRefusalAnswer,
    PronounsAnswer,
    PronounSentence,
    PronounsInput,
    ReaskAnswer,
    ReaskInput,
    ReaskVerdict,
    RefusalAnswer,
    RefusalInput,
    RefusalItem,
    RenderedPrompt,
    RubricInput,
    RubricPassFailAnswer,
    RubricScoreAnswer,
    StatementAnswer,
)
from schemas.conversation import ConversationTurn
from schemas.interaction import Interaction
from schemas.results import JudgeCall, Stage
from schemas.settings import JudgeSettings, Settings

#: the reason a fabricated statement carries: the prompt's maximum of 15 words
REASON = " ".join(["word"] * 15)
DRY_RUN_URL = "http://127.0.0.1:9/v1"  # never contacted


class StageEstimate(BaseModel):
    calls: int = Field(0, description="requests the judge would receive")
    input_chars: int = Field(0, description="characters of those requests (messages and response_format)")
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class CostEstimate(BaseModel):
    """The judge calls, tokens and cost of judging a file (``pipeline.estimate``)."""

    input: str
    judge: str = Field(description="judge kind")
    model: str = Field(description="the model the calls would name (priced by judge.prices)")
    priced: bool = Field(description="the model has a price in judge.prices (else the cost is 0)")
    chars_per_token: float
    interactions: int = Field(description="valid interactions read")
    invalid_lines: int = 0
    judged: int = Field(description="interactions that would be judged (after the sampling rules, if any)")
    skipped: dict[str, int] = Field(default_factory=dict, description="skipped interactions by reason")
    failed: int = Field(0, description="interactions the dry run could not evaluate (see errors)")
    errors: list[str] = Field(default_factory=list)
    sampling_rules: str | None = None
    stages: dict[str, StageEstimate] = Field(default_factory=dict)
    total: StageEstimate = Field(default_factory=StageEstimate)


@dataclass(frozen=True)
class SentCall:
    stage: Stage
    prompt: str
    input_chars: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def fabricate(prompt: RenderedPrompt[Any]) -> BaseModel:
    """A valid answer to a rendered prompt, from the input it was rendered from."""
    inp = prompt.input

    def statements(hypotheses: Sequence[str]) -> list[HypothesisAnswer]:
        return [
            HypothesisAnswer(
                id=i,
                statements=[StatementAnswer(statement=h, reason=REASON, verdict="not_stated", tag="claim")],
            )
            for i, h in enumerate(hypotheses, 1)
        ]

    if isinstance(inp, PronounsInput):
        return PronounsAnswer(
            sentences=[PronounSentence(id=i, text=s) for i, s in enumerate(inp.sentences, 1)]
        )
    if isinstance(inp, NliInput):
        if inp.ask_refusal:
            return NliRefusalAnswer(hypotheses=statements(inp.hypotheses), refusal=False)
        return NliAnswer(hypotheses=statements(inp.hypotheses))
    if isinstance(inp, NliCasesInput):
        cases = [CaseAnswer(id=n, hypotheses=statements(c.hypotheses)) for n, c in enumerate(inp.cases, 1)]
        return prompt.output_model.model_validate({"cases": [c.model_dump() for c in cases]})
    if isinstance(inp, RefusalInput):
        return RefusalAnswer(texts=[RefusalItem(id=i, refusal=False) for i in range(1, len(inp.texts) + 1)])
    if isinstance(inp, RubricInput):  # a custom rubric: a reason of the same length, the lowest grade
        if prompt.output_model is RubricScoreAnswer:
            return RubricScoreAnswer(reason=REASON, score=1)
        return RubricPassFailAnswer(reason=REASON, verdict="fail")
    if isinstance(inp, ArgumentsInput):  # tool-argument values: a reason of the same length, unsupported
        count = len(inp.values)
        verdicts = [ArgumentVerdict(id=i, reason=REASON, supported=False) for i in range(1, count + 1)]
        return ArgumentsAnswer(values=verdicts)
    if isinstance(inp, ReaskInput):  # pairs of user turns: a reason of the same length, no re-ask
        pairs = [ReaskVerdict(id=i, reason=REASON, reasked=False) for i in range(1, len(inp.pairs) + 1)]
        return ReaskAnswer(pairs=pairs)
    raise ValueError(f"no dry-run answer for prompt {prompt.name} (input {type(inp).__name__})")


def request_chars(body: dict[str, Any]) -> int:
    """Characters of what a request makes the model read: its messages and its response_format."""
    chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    if "response_format" in body:
        chars += len(json.dumps(body["response_format"], separators=(",", ":")))
    return chars


class DryRunClient(JudgeClient):
    """A JudgeClient that builds and counts each request, then answers it locally (``fabricate``)."""

    def __init__(self, settings: JudgeSettings, chars_per_token: float, **kwargs: Any) -> None:
        super().__init__(settings, base_url=DRY_RUN_URL, api_key=SecretStr("dry-run"), **kwargs)
        self.chars_per_token = chars_per_token
        self.sent: list[SentCall] = []

    def tokens(self, chars: int) -> int:
        return math.ceil(chars / self.chars_per_token) if chars else 0

    async def complete_graded(
        self,
        prompt: RenderedPrompt[Any],
        *,
        stage: Stage,
        items: int = 1,
        check: Callable[[Any], None] | None = None,
        logprobs: int = 0,
    ) -> tuple[Any, JudgeCall, Sequence[TokenLogprob]]:
        """Every request (``complete`` too) is counted here; answered without token log-probabilities."""
        chars = request_chars(self._body(prompt, self.format_mode, logprobs))
        answer = prompt.output_model.model_validate(fabricate(prompt).model_dump())
        if check is not None:
            check(answer)
        tokens_in, tokens_out = self.tokens(chars), self.tokens(len(answer.model_dump_json()))
        cost = price(self.settings, self.model, tokens_in, tokens_out)
        self.sent.append(SentCall(stage, prompt.name, chars, tokens_in, tokens_out, cost))
        call = JudgeCall(
            stage=stage, judge=self.judge_name, model=self.model_id, input_tokens=tokens_in,
            output_tokens=tokens_out, cost_usd=cost, attempts=1, items=items,
        )  # fmt: skip
        return answer, call, []


def _dry_llm(settings: Settings, kind: Literal["openai", "local"]) -> tuple[Judge, DryRunClient]:
    from pipeline.judges.llm_judge import LLMJudge
    from pipeline.judges.local_model import MODEL_ALIAS

    js = settings.judge
    if kind == "local":  # the model llama.cpp serves, in the format it is asked for
        model, fmt = MODEL_ALIAS, "json_object_schema"
    else:
        model, fmt = js.model, None
    judge = LLMJudge(js, name=kind, base_url=DRY_RUN_URL, model=model, api_key=SecretStr("dry-run"))
    client = DryRunClient(
        js, settings.pipeline.chars_per_token, judge_name=kind, model=model, format_mode=fmt
    )
    judge.client = client
    judge.model = client.model_id
    return judge, client


@asynccontextmanager
async def dry_run_judge(settings: Settings) -> AsyncIterator[tuple[Judge, DryRunClient | None]]:
    """The configured judge kind with its LLM part replaced by a DryRunClient (None for lexical)."""
    from pipeline.judges.lexical import LexicalJudge

    js = settings.judge
    client: DryRunClient | None = None
    judge: Judge
    if js.kind == "lexical":
        judge = LexicalJudge()
    elif js.kind == "cascade":
        from pipeline.judges.cascade import CascadeJudge

        llm, client = _dry_llm(settings, js.cascade_llm)
        judge = CascadeJudge(LexicalJudge(), llm, js, llm_refusals=js.cascade_llm_refusals)
    else:
        judge, client = _dry_llm(settings, js.kind)
    try:
        yield judge, client
    finally:
        await judge.aclose()


def dry_run_settings(settings: Settings) -> Settings:
    """The settings with the verdict cache in memory only (a dry run must never fill a real cache)."""
    return settings.with_changes(judge={"cache_path": None})


async def _evaluate(evaluator: Evaluator, items: Sequence[Interaction], concurrency: int) -> list[str]:
    slots = asyncio.Semaphore(max(1, concurrency))
    errors: list[str] = []

    async def one(interaction: Interaction) -> None:
        async with slots:
            try:
                await evaluator.evaluate(interaction)
            except Exception as exc:  # reported, never dropped
                errors.append(f"{interaction.interaction_id}: {type(exc).__name__}: {exc}")

    await asyncio.gather(*(one(i) for i in items))
    return errors


def tally(sent: Sequence[SentCall]) -> tuple[dict[str, StageEstimate], StageEstimate]:
    stages: dict[str, StageEstimate] = {}
    total = StageEstimate()
    for call in sent:
        for into in (stages.setdefault(call.stage, StageEstimate()), total):
            into.calls += 1
            into.input_chars += call.input_chars
            into.input_tokens += call.input_tokens
            into.output_tokens += call.output_tokens
            into.cost_usd += call.cost_usd
    return stages, total


def conversation_turns(interactions: Sequence[Interaction]) -> list[list[ConversationTurn]]:
    """The turns of each conversation of these interactions (those with a conversation_id), in order."""
    grouped: dict[tuple[str, str, str], dict[str, ConversationTurn]] = {}
    for i in interactions:
        if i.conversation_id is not None:
            turn = ConversationTurn(
                interaction_id=i.interaction_id, timestamp=i.timestamp, question=i.question, answer=i.answer
            )
            grouped.setdefault((i.app, i.model, i.conversation_id), {})[i.interaction_id] = turn
    return [in_order(list(turns.values())) for turns in grouped.values()]


async def estimate(
    interactions: Sequence[Interaction],
    settings: Settings,
    *,
    sampler: Sampler | None = None,
    concurrency: int = 32,
    source: str = "",
) -> CostEstimate:
    """The judge calls, tokens and cost of judging ``interactions`` (after ``sampler``'s rules), the
    rubrics of ``evaluators.file`` included (stage ``custom``)."""
    settings = dry_run_settings(settings)
    judged: list[Interaction] = []
    skipped: Counter[str] = Counter()
    for interaction in interactions:
        decision = sampler.decide(interaction, budgets=False) if sampler is not None else None
        if decision is None or decision.judge:
            judged.append(interaction)
        else:
            skipped[decision.reason] += 1
    async with dry_run_judge(settings) as (judge, client):
        evaluator = Evaluator(judge, settings, custom=open_custom(settings.evaluators, judge))
        try:
            errors = await _evaluate(evaluator, judged, concurrency)
        finally:
            await evaluator.aclose()
        if settings.conversations.enabled:
            pair_judge = ConversationJudge(judge, settings.conversations)
            if pair_judge:
                await asyncio.gather(*(pair_judge.review(t) for t in conversation_turns(interactions)))
    stages, total = tally(client.sent if client is not None else [])
    model = client.model if client is not None else judge.model
    return CostEstimate(
        input=source, judge=settings.judge.kind, model=model, priced=model in settings.judge.prices,
        chars_per_token=settings.pipeline.chars_per_token, interactions=len(interactions), judged=len(judged),
        skipped=dict(sorted(skipped.items())), failed=len(errors), errors=errors[:20],
        stages=stages, total=total,
    )  # fmt: skip


def summary(e: CostEstimate) -> str:
    """The printed estimate: interactions, then calls, tokens and cost per stage and in all."""
    skipped = sum(e.skipped.values())
    lines = [
        f"{e.input}: {e.interactions} interactions"
        + (f" ({e.invalid_lines} invalid lines left out)" if e.invalid_lines else "")
        + f", {e.judged} to judge, {skipped} skipped"
        + (" (" + ", ".join(f"{k} {v}" for k, v in e.skipped.items()) + ")" if e.skipped else "")
        + (f" by {e.sampling_rules}" if e.sampling_rules else ""),
        f"judge {e.judge} ({e.model}), estimated without calling it ({e.chars_per_token:g} characters a "
        f"token{'' if e.priced else '; no price for this model: cost 0'}):",
    ]
    rows = [*sorted(e.stages.items()), ("total", e.total)]
    width = max(9, *(len(name) for name, _ in rows))
    lines.append(
        f"  {'stage':<{width}} {'calls':>7} {'input tokens':>13} {'output tokens':>14} {'cost USD':>11}"
    )
    for name, s in rows:
        lines.append(
            f"  {name:<{width}} {s.calls:>7} {s.input_tokens:>13,} {s.output_tokens:>14,} {s.cost_usd:>11.4f}"
        )
    if e.judged:
        t = e.total
        lines.append(
            f"  per judged interaction: {t.calls / e.judged:.2f} calls, "
            f"{(t.input_tokens + t.output_tokens) / e.judged:,.0f} tokens, ${t.cost_usd / e.judged:.5f}"
        )
    if e.failed:
        lines.append(f"  {e.failed} interactions failed in the dry run: {'; '.join(e.errors[:3])}")
    return "\n".join(lines)
