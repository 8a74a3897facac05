"""interactions -> evaluations in one processor (``kafka.topology = "fused"``): every stage of an interaction
runs here (pipeline.evaluator.Evaluator), so an interaction costs two Kafka messages instead of the staged
topology's eight (five read, three written by the worker). A stage that still fails after the judge's
retries dead-letters the interaction with that stage's name (there is no join to emit it incomplete); an
unexpected error is dead-lettered as stage "evaluate", a message that does not validate as "validate".
Relevance is scored by the evaluator (``pipeline.metrics.relevance.score_relevance``, as the staged join
does): a failure leaves it out and marks it missing (the row is written, incomplete), never dead-letters
the interaction."""

from __future__ import annotations

from typing import Any

from schemas.interaction import Interaction
from schemas.topics import TOPIC_MESSAGES
from streams.privacy import letter_payload
from streams.processors.base import Processor
from streams.sampling import skip_unsampled


class EvaluateProcessor(Processor[Interaction]):
    """Every stage of an interaction in one processor; a failing stage raises ``StageError`` and the
    interaction is dead-lettered under that stage's name (``streams.codec.stage_of``)."""

    name = "groundwatch.evaluate"
    stage = "evaluate"
    input_model = TOPIC_MESSAGES.interactions

    @property
    def source_topic(self) -> str:
        return self.ctx.names.interactions

    def letter_payload(self, event: Any, exc: Exception) -> bytes | str | None:
        return letter_payload(self.resources.privacy, event.value, exc, self.ctx.settings.limits)

    async def process(self, message: Interaction) -> None:
        privacy = self.resources.privacy
        message = privacy.for_storage(message)  # privacy.mode all: masked before any row is built
        if await skip_unsampled(self.ctx, self.resources.sampler, message):
            return  # not judged (sampling rules or the judge budget): stored with its skip reason
        judged = privacy.for_judge(message)  # privacy.mode judge: what the judge sees
        evaluation = await self.resources.evaluator.evaluate(judged.interaction, judged.originals)
        await self.ctx.send(self.ctx.names.evaluations, message.interaction_id, evaluation)
