"""interactions -> converted: sentence conversion with pronoun replacement (pipeline.convert)."""

from __future__ import annotations

from pipeline.convert import convert
from schemas.interaction import Interaction
from streams.processors.base import Processor


class ConvertProcessor(Processor[Interaction]):
    name = "groundwatch.convert"
    stage = "convert"
    input_model = Interaction

    @property
    def source_topic(self) -> str:
        return self.ctx.names.interactions

    async def process(self, message: Interaction) -> None:
        converted = await convert(message, self.resources.judge, self.ctx.settings)
        await self.ctx.send(self.ctx.names.converted, message.interaction_id, converted)
