"""interactions -> converted: sentence conversion with pronoun replacement (pipeline.convert). An
interaction the sampling rules or the judge budget skip goes to evaluations unjudged (streams.sampling).
Personal data is masked here first, as ``privacy.mode`` says (streams.privacy)."""

from __future__ import annotations

from typing import Any

from pipeline.convert import convert
from schemas.interaction import Interaction
from schemas.topics import TOPIC_MESSAGES
from streams.privacy import letter_payload
from streams.processors.base import Processor
from streams.sampling import skip_unsampled


class ConvertProcessor(Processor[Interaction]):
    name = "groundwatch.convert"
    stage = "convert"
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
        settings = self.ctx.settings
        converted = await convert(judged.interaction, self.resources.judge, settings, judged.originals)
        await self.ctx.send(self.ctx.names.converted, message.interaction_id, converted)
