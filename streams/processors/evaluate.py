"""interactions -> evaluations in one processor (``kafka.topology = "fused"``): every stage of an interaction
runs here (pipeline.evaluator.Evaluator), so an interaction costs two Kafka messages instead of the staged
topology's eight (five read, three written by the worker). A stage that still fails after the judge's
retries dead-letters the interaction with that stage's name (there is no join to emit it incomplete); an
unexpected error is dead-lettered as stage "evaluate", a message that does not validate as "validate".
Relevance is scored by the evaluator (``pipeline.metrics.relevance.score_relevance``, as the staged join
does): a failure leaves it out and marks it missing (the row is written, incomplete), never dead-letters
the interaction."""

from __future__ import annotations

from pipeline.privacy.mask import Masked
from schemas.interaction import Interaction
from streams.processors.entry import EntryProcessor


class EvaluateProcessor(EntryProcessor):
    """Every stage of an interaction in one processor; a failing stage raises ``StageError`` and the
    interaction is dead-lettered under that stage's name (``streams.codec.stage_of``). Masking and
    sampling come first (streams.processors.entry)."""

    name = "groundwatch.evaluate"
    stage = "evaluate"

    async def judge(self, message: Interaction, judged: Masked) -> None:
        evaluation = await self.resources.evaluator.evaluate(judged.interaction, judged.originals)
        await self.ctx.send(self.ctx.names.evaluations, message.interaction_id, evaluation)
