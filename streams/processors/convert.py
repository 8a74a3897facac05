"""interactions -> converted: sentence conversion with pronoun replacement (pipeline.convert). An
interaction the sampling rules or the judge budget skip goes to evaluations unjudged, personal data masked
first (streams.processors.entry)."""

from __future__ import annotations

from pipeline.convert import convert
from pipeline.privacy.mask import Masked
from schemas.interaction import Interaction
from streams.processors.entry import EntryProcessor


class ConvertProcessor(EntryProcessor):
    name = "groundwatch.convert"
    stage = "convert"

    async def judge(self, message: Interaction, judged: Masked) -> None:
        settings = self.ctx.settings
        converted = await convert(judged.interaction, self.resources.judge, settings, judged.originals)
        await self.ctx.send(self.ctx.names.converted, message.interaction_id, converted)
