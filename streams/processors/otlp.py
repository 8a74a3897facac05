"""otlp -> interactions: OpenTelemetry traces turned into interactions (pipeline.otlp), when
``kafka.otlp_input`` is on. A model-call span that cannot be mapped becomes a dead letter (stage
``otlp``) with the reason and the span; the other interactions of the same export go on."""

from __future__ import annotations

import json

from pipeline.otlp import convert_request
from schemas.errors import InvalidMessage
from schemas.otlp import OtlpTraces
from streams.processors.base import Processor


class OtlpProcessor(Processor[OtlpTraces]):
    name = "groundwatch.otlp"
    stage = "otlp"
    input_model = OtlpTraces

    @property
    def source_topic(self) -> str:
        return self.ctx.names.otlp

    async def process(self, message: OtlpTraces) -> None:
        converted = convert_request(message.model_dump())
        for interaction in converted.interactions:
            await self.ctx.send(self.ctx.names.interactions, interaction.interaction_id, interaction)
        for error in converted.errors:
            span = {"trace_id": error.trace_id, "span_id": error.span_id, "name": error.name}
            await self.ctx.dead_letter(
                InvalidMessage(f"span {error.name!r} not mapped: {error.reason}"),
                "otlp",
                json.dumps(span),
                source_topic=self.source_topic,
                interaction_id=f"{error.trace_id}:{error.span_id}",
            )
