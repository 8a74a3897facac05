"""All stages for one interaction: convert, then NLI and refusal (and relevance) concurrently, assemble.

The stream's default (fused) topology runs it in one processor; the staged topology runs the stages as
separate processors. The batch CLI, benchmarks and tests call it too. One ``Evaluator`` serves many
concurrent ``evaluate`` calls (their refusal texts, and batched NLI cases, share prompts); create it
inside the event loop that uses it.
A stage failure is raised as ``StageError`` (a ``JudgeError``) naming the stage, or with
``evaluate_apart`` returned beside an Evaluation that names it missing; relevance is the
exception (``pipeline.metrics.relevance.score_relevance``): its failure leaves it out, named in
``missing``, as in the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.argument_judge import ArgumentJudge
from pipeline.assemble import assemble
from pipeline.clock import SYSTEM_CLOCK, Clock
from pipeline.convert import convert
from pipeline.custom_evaluators import CustomEvaluators, with_custom
from pipeline.judges.base import Judge
from pipeline.metrics.relevance import RelevanceScore, RelevanceScorerLike, score_relevance
from pipeline.nli import run_nli
from pipeline.nli_grouping import NliGrouper, nli_judge
from pipeline.refusal import RefusalClassifier
from pipeline.topic_assignment import TopicAssigner, with_topic
from schemas.errors import StageError
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.results import Converted, NliResult, RefusalResult
from schemas.settings import Settings


@dataclass(frozen=True)
class Judged:
    """An interaction's Evaluation and the stages that failed apart (named in its ``missing``)."""

    evaluation: Evaluation
    failures: list[StageError] = field(default_factory=list)


class Evaluator:
    def __init__(
        self,
        judge: Judge,
        settings: Settings,
        relevance_scorer: RelevanceScorerLike | None = None,
        custom: CustomEvaluators | None = None,
        clock: Clock = SYSTEM_CLOCK,
        topics: TopicAssigner | None = None,
    ) -> None:
        """``custom``: your own evaluators (pipeline.custom_evaluators), run beside the core stages;
        ``clock``: what stamps an Evaluation's ``evaluated_at``; ``topics``: gives each Evaluation its
        topic (pipeline.topic_assignment)."""
        self.clock = clock
        self.topics = topics
        self.judge = judge
        self.settings = settings
        self.relevance_scorer = relevance_scorer
        self.custom = custom if custom else None
        self.refusals = RefusalClassifier(judge, settings)
        # batched NLI: cases of concurrent interactions share prompts (pipeline.nli_grouping)
        self.nli_judge = nli_judge(judge, settings)
        # tools.argument_judge llm: the LLM judge's review of unsupported tool arguments
        self.arguments = ArgumentJudge(judge, settings)

    async def _convert(self, interaction: Interaction, originals: Mapping[str, str] | None) -> Converted:
        try:
            return await convert(interaction, self.judge, self.settings, originals)
        except Exception as exc:
            raise StageError("convert", str(exc) or repr(exc)) from exc

    async def _nli(self, converted: Converted) -> NliResult:
        try:
            return await run_nli(converted, self.nli_judge, self.settings)
        except Exception as exc:
            raise StageError("nli", str(exc) or repr(exc)) from exc

    async def _refusal(self, converted: Converted) -> RefusalResult | None:
        if self.settings.pipeline.refusal_mode == "same":
            return None
        try:
            return await self.refusals.classify(converted)
        except Exception as exc:
            raise StageError("refusal", str(exc) or repr(exc)) from exc

    async def _relevance(self, interaction: Interaction) -> RelevanceScore | None:
        if self.relevance_scorer is None:
            return None
        return await score_relevance(self.relevance_scorer, interaction)

    async def evaluate(
        self, interaction: Interaction, originals: Mapping[str, str] | None = None
    ) -> Evaluation:
        """``originals``: the values behind a masked interaction's placeholders (``privacy.mode``
        judge), put back in the Evaluation. The custom evaluators start with the core stages and never
        fail them; once the core is done they get ``evaluators.wait_after_core_s`` more. The first stage
        that fails raises its ``StageError`` (the others are cancelled)."""
        return (await self._judge(interaction, originals, apart=False)).evaluation

    async def evaluate_apart(
        self, interaction: Interaction, originals: Mapping[str, str] | None = None
    ) -> Judged:
        """As ``evaluate``, but NLI and refusal fail apart, as in the staged stream: a stage that fails
        is named in the Evaluation's ``missing`` and returned in ``failures``; the Evaluation is still
        made. Only a failed conversion raises (nothing can be judged without it)."""
        return await self._judge(interaction, originals, apart=True)

    async def _judge(
        self, interaction: Interaction, originals: Mapping[str, str] | None, *, apart: bool
    ) -> Judged:
        if self.custom is None:
            return await self._core(interaction, originals, apart)
        core = asyncio.ensure_future(self._core(interaction, originals, apart))
        custom = asyncio.ensure_future(self.custom.run_bounded(interaction, core))
        try:
            judged = await core
        except BaseException:
            custom.cancel()
            raise
        scores, calls = await custom
        return Judged(with_custom(judged.evaluation, scores, calls), judged.failures)

    async def _stages(
        self, converted: Converted, interaction: Interaction, apart: bool
    ) -> tuple[NliResult | StageError, RefusalResult | StageError | None, RelevanceScore | None]:
        """NLI, refusal and relevance side by side. Not ``apart``: a TaskGroup, so when one stage fails
        the others are cancelled instead of spending judge calls, and the failure is raised."""
        if apart:
            nli, refusal, relevance = await asyncio.gather(
                self._nli(converted), self._refusal(converted), self._relevance(interaction),
                return_exceptions=True,
            )  # fmt: skip
            for result in (nli, refusal, relevance):
                if isinstance(result, BaseException) and not isinstance(result, StageError):
                    raise result  # a bug or a cancellation, not a stage that failed
            return nli, refusal, relevance  # type: ignore[return-value]
        try:
            async with asyncio.TaskGroup() as group:
                nli_task = group.create_task(self._nli(converted))
                refusal_task = group.create_task(self._refusal(converted))
                relevance_task = group.create_task(self._relevance(interaction))
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None  # the first failing stage's StageError
        return nli_task.result(), refusal_task.result(), relevance_task.result()

    async def _core(
        self, interaction: Interaction, originals: Mapping[str, str] | None, apart: bool
    ) -> Judged:
        converted = await self._convert(interaction, originals)
        nli, refusal, relevance = await self._stages(converted, interaction, apart)
        failures = [r for r in (nli, refusal) if isinstance(r, StageError)]
        nli_ok = nli if isinstance(nli, NliResult) else None
        refusal_ok = refusal if isinstance(refusal, RefusalResult) else None
        missing = [f.stage for f in failures]
        if relevance is None:
            evaluation = assemble(
                converted, nli_ok, refusal_ok, self.settings, evaluated_at=self.clock.now(), missing=missing
            )
        else:
            evaluation = assemble(
                converted, nli_ok, refusal_ok, self.settings, evaluated_at=self.clock.now(),
                relevance=relevance.value, missing=[*missing, "relevance"] if relevance.failed else missing,
                extra_seconds={"relevance": relevance.seconds},
            )  # fmt: skip
        evaluation = await with_topic(self.topics, evaluation, converted.interaction.question)
        return Judged(await self.arguments.review(evaluation, converted.interaction), failures)

    async def aclose(self, *, cancel: bool = False) -> None:
        """Finish the refusal batches and NLI groups still in flight, or with ``cancel`` drop them (the
        judge is closed by whoever opened it); stop the python evaluators' threads."""
        if self.custom is not None:
            self.custom.close()
        await self.refusals.aclose(cancel=cancel)
        if isinstance(self.nli_judge, NliGrouper):
            await self.nli_judge.aclose(cancel=cancel)
