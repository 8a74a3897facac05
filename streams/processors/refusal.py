"""converted -> refusals: answer / ground-truth refusal flags (pipeline.refusal.RefusalClassifier).

The classifier micro-batches the texts of concurrent callers into prompts of ``refusal_batch_size``,
so this processor's concurrency is what fills its batches.
"""

from __future__ import annotations

from typing import Any

from schemas.errors import InvalidMessage, JudgeError
from schemas.results import Converted
from streams.codec import decode
from streams.context import StreamContext


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.converted)
    settings = ctx.settings

    async def handle(event: Any) -> None:
        raw = event.value
        try:
            converted = decode(raw, Converted, settings.limits)
        except InvalidMessage:
            return  # the nli processor reads the same topic and dead-letters it once
        iid = converted.interaction.interaction_id
        res = await ctx.res.wait_ready()
        try:
            result = await res.refusals.classify(converted)
        except JudgeError as exc:
            await ctx.dead_letter_judge_error("refusal", exc, raw, ctx.names.converted, converted.interaction)
            return
        await ctx.send(ctx.names.refusals, iid, result)

    return ctx.bounded_agent(source, "groundwatch.refusal", handle, "refusal", ctx.names.converted)
