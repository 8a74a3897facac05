"""Where interactions enter judging: the processor that reads the interactions topic (``ConvertProcessor``
staged, ``EvaluateProcessor`` fused). Personal data is masked first, as ``privacy.mode`` says
(streams.privacy): mode all before anything is built from the interaction; an interaction the sampling
rules or the judge budget skip goes to evaluations unjudged (streams.sampling); the rest is handed to
``judge`` as the judge may see it (mode judge: masked, the originals carried)."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from pipeline.privacy.mask import Masked
from schemas.interaction import Interaction
from schemas.topics import TOPIC_MESSAGES
from streams.privacy import letter_payload
from streams.processors.base import Processor
from streams.sampling import skip_unsampled


class EntryProcessor(Processor[Interaction]):
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
        await self.judge(message, privacy.for_judge(message))  # privacy.mode judge: what the judge sees

    @abstractmethod
    async def judge(self, message: Interaction, judged: Masked) -> None:
        """Judge ``message`` (as stored) from ``judged`` (as the judge sees it) and send what comes out."""
