"""interactions -> converted: sentence conversion with pronoun replacement (pipeline.convert)."""

from __future__ import annotations

from typing import Any

from schemas.errors import JudgeError
from schemas.interaction import Interaction
from streams.context import StreamContext


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.interactions)
    settings = ctx.settings

    async def handle(event: Any) -> None:
        from pipeline.convert import convert

        raw = event.value
        interaction = await ctx.decode_or_dead_letter(raw, Interaction, ctx.names.interactions)
        if interaction is None:
            return
        res = await ctx.res.wait_ready()
        try:
            converted = await convert(interaction, res.judge, settings)
        except JudgeError as exc:
            await ctx.dead_letter_judge_error("convert", exc, raw, ctx.names.interactions, interaction)
            return
        await ctx.send(ctx.names.converted, interaction.interaction_id, converted)

    return ctx.bounded_agent(source, "groundwatch.convert", handle, "convert", ctx.names.interactions)
