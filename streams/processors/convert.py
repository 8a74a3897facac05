"""interactions -> converted: sentence conversion with pronoun replacement (pipeline.convert)."""

from __future__ import annotations

from typing import Any

from pipeline.judges.base import JudgeError
from schemas.interaction import Interaction
from streams.codec import DecodeError, dead_letter, decode
from streams.context import StreamContext
from streams.runner import run_bounded


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.interactions)
    settings = ctx.settings

    async def handle(event: Any) -> None:
        from pipeline.convert import convert

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
            converted = await convert(interaction, res.judge, settings)
        except JudgeError as exc:
            await ctx.send_dead(
                dead_letter(
                    stage="convert",
                    error=exc,
                    payload=raw,
                    source_topic=ctx.names.interactions,
                    interaction_id=interaction.interaction_id,
                    original=interaction.model_dump_json(),
                )
            )
            return
        await ctx.send(ctx.names.converted, interaction.interaction_id, converted)

    async def convert_agent(stream: Any) -> None:
        await run_bounded(
            stream,
            handle,
            settings.kafka.stage_concurrency,
            on_error=ctx.dead_letter_on_error("convert", ctx.names.interactions),
            error_attempts=settings.kafka.deadletter_attempts,
        )

    return ctx.app.agent(source, name="groundwatch.convert")(convert_agent)
