"""converted -> judged: the judge's two stages of one Converted, read once, in one result.

NLI (the three (premise, hypotheses) pairs, ``pipeline.nli``) and refusal (answer / ground-truth flags,
``pipeline.refusal.RefusalClassifier``, which micro-batches the texts of concurrent interactions into
prompts of ``refusal_batch_size``) run side by side on the same decoded Converted; both results go to the
join in one ``JudgeResult``. In the ``same`` refusal mode the refusal question is asked inside the NLI
prompt and the result has no refusal part.

The stages fail apart: a stage that fails (its judge gave up) is dead-lettered under its own name, with
its own error and the original interaction, and is None in the result, which is still sent: the join
emits the interaction at once, incomplete (``missing`` names the stage). When the result cannot be sent,
the message is dead-lettered (stage "nli") and the join emits it incomplete after its timeout. The event
is acked once the result and the dead letters are out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from pipeline.nli import run_nli
from schemas.errors import GroundwatchError
from schemas.results import Converted, JudgeResult, NliResult, RefusalResult, Stage
from schemas.topics import TOPIC_MESSAGES
from streams.processors.base import Processor, StageFailures

log = logging.getLogger(__name__)

R = TypeVar("R")


class JudgeProcessor(Processor[Converted]):
    name = "groundwatch.judge"
    stage = "nli"
    input_model = TOPIC_MESSAGES.converted
    between_stages = True

    @property
    def source_topic(self) -> str:
        return self.ctx.names.converted

    async def _stage(self, stage: Stage, key: str, work: Awaitable[R]) -> R | Exception:
        """One stage's result, or its failure."""
        try:
            return await work
        except Exception as exc:
            if not isinstance(exc, GroundwatchError):  # a bug, not a judge that gave up: keep its traceback
                log.exception("%s: the %s stage failed", key, stage)
            return exc

    async def _core(
        self, message: Converted, key: str, refusal_task: asyncio.Task[Any] | None
    ) -> tuple[Any, Any]:
        nli = await self._stage("nli", key, run_nli(message, self.resources.nli_judge, self.ctx.settings))
        refusal = await refusal_task if refusal_task is not None else None
        return nli, refusal

    async def process(self, message: Converted) -> None:
        names, key, settings = self.ctx.names, message.interaction.interaction_id, self.ctx.settings
        # refusal in a task of its own, NLI in this one (one task an interaction, not two)
        refusal_task = (
            asyncio.create_task(self._stage("refusal", key, self.resources.refusals.classify(message)))
            if settings.pipeline.refusal_mode != "same"
            else None
        )
        custom = self.resources.custom
        # the core stages in one future, so the custom evaluators (started beside them) know when it is done
        core = asyncio.ensure_future(self._core(message, key, refusal_task))
        custom_task = asyncio.ensure_future(custom.run_bounded(message.interaction, core)) if custom else None
        try:
            nli, refusal = await core
            scores, calls = await custom_task if custom_task is not None else ({}, [])
        finally:  # cancelled (the worker is stopping): the other stages go with it
            for task in (refusal_task, custom_task):
                if task is not None and not task.done():
                    task.cancel()
        failures: list[tuple[Stage, Exception]] = []
        if isinstance(nli, Exception):
            failures.append(("nli", nli))
        if isinstance(refusal, Exception):
            failures.append(("refusal", refusal))
        result = JudgeResult(
            interaction_id=key,
            digest=message.digest,
            nli=nli if isinstance(nli, NliResult) else None,
            refusal=refusal if isinstance(refusal, RefusalResult) else None,
            custom=scores,
            custom_calls=calls,
        )
        try:
            await self.ctx.send(names.judged, key, result)
        except Exception as exc:  # the message is dead-lettered under "nli" with this error (one per stage)
            failures = [(self.stage, exc), *(f for f in failures if f[0] != self.stage)]
        if failures:  # one dead letter per failure, each under its stage with its own error (on_error)
            raise StageFailures(failures)
