"""interactions -> evaluations in one processor (``kafka.topology = "fused"``): every stage of an
interaction runs here (pipeline.evaluator.Evaluator), so an interaction costs two Kafka messages
instead of about ten. A stage that still fails after the judge's retries dead-letters the interaction
with that stage's name (there is no join to emit it incomplete); an unexpected error is dead-lettered as
stage "evaluate", a message that does not validate as "validate". Relevance is scored here
beside the evaluation, as the staged join does: a failure leaves it out and marks it missing (the row
is written, incomplete), never dead-letters the interaction."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pipeline.metrics.relevance import relevance_question
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from streams.privacy import letter_payload
from streams.processors.base import Processor
from streams.sampling import skip_unsampled

log = logging.getLogger(__name__)


async def score_relevance(scorer: Any, interaction: Interaction) -> tuple[float | None, float, bool]:
    """(relevance, seconds, failed) of one interaction; a failure is logged, never raised."""
    started = time.perf_counter()
    try:
        value = await scorer.score(relevance_question(interaction), interaction.answer)
    except Exception as exc:
        log.warning("relevance of %s failed: %s", interaction.interaction_id, exc)
        return None, time.perf_counter() - started, True
    return float(value), time.perf_counter() - started, False


def with_relevance(evaluation: Evaluation, value: float | None, seconds: float, failed: bool) -> Evaluation:
    """The evaluation with its relevance; a failure is named in ``missing`` (incomplete, as in the join)."""
    update: dict[str, Any] = {
        "relevance": value,
        "stage_seconds": {**evaluation.stage_seconds, "relevance": seconds},
    }
    if failed:
        update["missing"] = [*evaluation.missing, "relevance"]
        update["complete"] = False
    return evaluation.model_copy(update=update)


class EvaluateProcessor(Processor[Interaction]):
    """Every stage of an interaction in one processor; a failing stage raises ``StageError`` and the
    interaction is dead-lettered under that stage's name (``streams.codec.stage_of``)."""

    name = "groundwatch.evaluate"
    stage = "evaluate"
    input_model = Interaction

    @property
    def source_topic(self) -> str:
        return self.ctx.names.interactions

    def letter_payload(self, event: Any, exc: Exception) -> bytes | str:
        return letter_payload(self.resources.privacy, event.value, exc, self.ctx.settings.limits)

    async def process(self, message: Interaction) -> None:
        privacy = self.resources.privacy
        message = privacy.for_storage(message)  # privacy.mode all: masked before any row is built
        if await skip_unsampled(self.ctx, self.resources.sampler, message):
            return  # not judged (sampling rules or the judge budget): stored with its skip reason
        judged = privacy.for_judge(message)  # privacy.mode judge: what the judge sees
        evaluator = self.resources.evaluator
        scorer = self.resources.relevance
        if scorer is None:
            evaluation = await evaluator.evaluate(judged.interaction, judged.originals)
        else:
            evaluation, (value, seconds, failed) = await asyncio.gather(
                evaluator.evaluate(judged.interaction, judged.originals), score_relevance(scorer, message)
            )
            evaluation = with_relevance(evaluation, value, seconds, failed)
        await self.ctx.send(self.ctx.names.evaluations, message.interaction_id, evaluation)
