"""converted -> nli + refusals: the judge's two stages of one Converted, read once.

NLI (the three (premise, hypotheses) pairs, ``pipeline.nli``) and refusal (answer / ground-truth flags,
``pipeline.refusal.RefusalClassifier``, which micro-batches the texts of concurrent interactions into
prompts of ``refusal_batch_size``) run side by side on the same decoded Converted; each result goes to
its own topic for the join as soon as it is ready. In the ``same`` refusal mode the refusal question is
asked inside the NLI prompt and only the NLI result is sent.

The stages fail apart, as two processors would: a stage that fails (its judge gave up) is dead-lettered
under its own name, with its own error and the original interaction, while the other stage's result is
still sent, so the join emits the interaction incomplete (``missing`` names the stage) once its timeout
has passed. When both fail, the message gets one dead letter per stage. The event is acked after that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from pydantic import BaseModel

from pipeline.nli import run_nli
from schemas.errors import GroundwatchError
from schemas.results import Converted, Stage
from streams.processors.base import Processor, StageFailures

log = logging.getLogger(__name__)


class JudgeProcessor(Processor[Converted]):
    name = "groundwatch.judge"
    stage = "nli"
    input_model = Converted

    @property
    def source_topic(self) -> str:
        return self.ctx.names.converted

    async def _stage(
        self, stage: Stage, topic: str, key: str, work: Awaitable[BaseModel]
    ) -> tuple[Stage, Exception] | None:
        """Run one stage and send its result; its failure, or None once its result is out."""
        try:
            await self.ctx.send(topic, key, await work)
        except Exception as exc:
            if not isinstance(exc, GroundwatchError):  # a bug, not a judge that gave up: keep its traceback
                log.exception("%s: the %s stage failed", key, stage)
            return stage, exc
        return None

    async def process(self, message: Converted) -> None:
        names, key, settings = self.ctx.names, message.interaction.interaction_id, self.ctx.settings
        stages = [self._stage("nli", names.nli, key, run_nli(message, self.resources.nli_judge, settings))]
        if settings.pipeline.refusal_mode != "same":
            refusal = self.resources.refusals.classify(message)
            stages.append(self._stage("refusal", names.refusals, key, refusal))
        failures = [failure for failure in await asyncio.gather(*stages) if failure is not None]
        if failures:  # one dead letter per failed stage, each with its own error (Processor.on_error)
            raise StageFailures(failures)
