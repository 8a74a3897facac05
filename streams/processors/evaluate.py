"""interactions -> evaluations in one processor (``kafka.topology = "fused"``): every stage of an
interaction runs here (pipeline.evaluator.Evaluator), so an interaction costs two Kafka messages
instead of about ten. A stage that still fails after the judge's retries dead-letters the interaction
with that stage's name (there is no join to emit it incomplete)."""

from __future__ import annotations

from typing import Any

from pipeline.evaluator import StageError
from pipeline.judges.base import JudgeError
from schemas.interaction import Interaction
from streams.codec import DecodeError, dead_letter, decode
from streams.context import StreamContext
from streams.runner import run_bounded


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.interactions)
    settings = ctx.settings

    async def handle(event: Any) -> None:
        raw = event.value
        try:
            interaction = decode(raw, Interaction, settings.limits)
        except DecodeError as exc:
            await ctx.send_dead(
                dead_letter(stage="validate", error=exc, payload=raw, source_topic=ctx.names.interactions)
            )
            return
        res = await ctx.res.wait_ready()
        try:
            evaluation = await res.evaluator.evaluate(interaction)
        except JudgeError as exc:
            await ctx.send_dead(
                dead_letter(
                    stage=exc.stage if isinstance(exc, StageError) else "nli",
                    error=exc,
                    payload=raw,
                    source_topic=ctx.names.interactions,
                    interaction_id=interaction.interaction_id,
                )
            )
            return
        await ctx.send(ctx.names.evaluations, interaction.interaction_id, evaluation)

    async def evaluate_agent(stream: Any) -> None:
        await run_bounded(
            stream,
            handle,
            settings.kafka.stage_concurrency,
            on_error=ctx.dead_letter_on_error("convert", ctx.names.interactions),
        )

    return ctx.app.agent(source, name="groundwatch.evaluate")(evaluate_agent)
