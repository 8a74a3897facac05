"""converted -> refusals: answer / ground-truth refusal flags (pipeline.refusal.RefusalClassifier).

The classifier micro-batches the texts of concurrent callers into prompts of ``refusal_batch_size``,
so this processor's concurrency is what fills its batches. It reads the same topic as the NLI
processor, which dead-letters an invalid Converted once; this one counts and skips it.
"""

from __future__ import annotations

from schemas.results import Converted
from streams.processors.base import Processor


class RefusalProcessor(Processor[Converted]):
    name = "groundwatch.refusal"
    stage = "refusal"
    input_model = Converted
    dead_letters_invalid = False

    @property
    def source_topic(self) -> str:
        return self.ctx.names.converted

    async def process(self, message: Converted) -> None:
        result = await self.resources.refusals.classify(message)
        await self.ctx.send(self.ctx.names.refusals, message.interaction.interaction_id, result)
