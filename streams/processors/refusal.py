"""converted -> refusals: answer / ground-truth refusal flags (pipeline.refusal.RefusalClassifier).

The classifier micro-batches the texts of concurrent callers into prompts of ``refusal_batch_size``,
so this processor's concurrency is what fills its batches.
"""

from __future__ import annotations

from typing import Any

from pipeline.judges.base import JudgeError
from schemas.results import Converted
from streams.codec import DecodeError, dead_letter, decode
from streams.context import StreamContext
from streams.runner import run_bounded


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.converted)
    settings = ctx.settings

    async def handle(event: Any) -> None:
        raw = event.value
        try:
            converted = decode(raw, Converted, settings.limits)
        except DecodeError:
            return  # the nli processor reads the same topic and dead-letters it once
        iid = converted.interaction.interaction_id
        res = await ctx.res.wait_ready()
        try:
            result = await res.refusals.classify(converted)
        except JudgeError as exc:
            await ctx.send_dead(
                dead_letter(
                    stage="refusal",
                    error=exc,
                    payload=raw,
                    source_topic=ctx.names.converted,
                    interaction_id=iid,
                    original=converted.interaction.model_dump_json(),
                )
            )
            return
        await ctx.send(ctx.names.refusals, iid, result)

    async def refusal_agent(stream: Any) -> None:
        await run_bounded(
            stream,
            handle,
            settings.kafka.stage_concurrency,
            on_error=ctx.dead_letter_on_error("refusal", ctx.names.converted),
            error_attempts=settings.kafka.deadletter_attempts,
        )

    return ctx.app.agent(source, name="groundwatch.refusal")(refusal_agent)
