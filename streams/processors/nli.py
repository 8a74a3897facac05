"""converted -> nli: the three (premise, hypotheses) pairs judged by the NLI judge (pipeline.nli)."""

from __future__ import annotations

from pipeline.nli import run_nli
from schemas.results import Converted
from streams.processors.base import Processor


class NliProcessor(Processor[Converted]):
    name = "groundwatch.nli"
    stage = "nli"
    input_model = Converted

    @property
    def source_topic(self) -> str:
        return self.ctx.names.converted

    async def process(self, message: Converted) -> None:
        result = await run_nli(message, self.resources.nli_judge, self.ctx.settings)
        await self.ctx.send(self.ctx.names.nli, message.interaction.interaction_id, result)
