"""interactions -> converted: sentence conversion with pronoun replacement (pipeline.convert). An
interaction the sampling rules or the judge budget skip goes to evaluations unjudged (streams.sampling)."""

from __future__ import annotations

from pipeline.convert import convert
from schemas.interaction import Interaction
from streams.processors.base import Processor
from streams.sampling import skip_unsampled


class ConvertProcessor(Processor[Interaction]):
    name = "groundwatch.convert"
    stage = "convert"
    input_model = Interaction

    @property
    def source_topic(self) -> str:
        return self.ctx.names.interactions

    async def process(self, message: Interaction) -> None:
        if await skip_unsampled(self.ctx, self.resources.sampler, message):
            return  # not judged (sampling rules or the judge budget): stored with its skip reason
        converted = await convert(message, self.resources.judge, self.ctx.settings)
        await self.ctx.send(self.ctx.names.converted, message.interaction_id, converted)
