"""converted -> nli: the three seed-000 pairs judged by the NLI judge (pipeline.nli)."""

from __future__ import annotations

from typing import Any

from schemas.errors import JudgeError
from schemas.results import Converted
from streams.context import StreamContext


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.converted)
    settings = ctx.settings

    async def handle(event: Any) -> None:
        from pipeline.nli import run_nli

        raw = event.value
        converted = await ctx.decode_or_dead_letter(raw, Converted, ctx.names.converted)
        if converted is None:
            return
        iid = converted.interaction.interaction_id
        res = await ctx.res.wait_ready()
        try:
            result = await run_nli(converted, res.nli_judge, settings)
        except JudgeError as exc:
            await ctx.dead_letter_judge_error("nli", exc, raw, ctx.names.converted, converted.interaction)
            return
        await ctx.send(ctx.names.nli, iid, result)

    return ctx.bounded_agent(source, "groundwatch.nli", handle, "nli", ctx.names.converted)
