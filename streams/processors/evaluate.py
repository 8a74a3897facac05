"""interactions -> evaluations in one processor (``kafka.topology = "fused"``): every stage of an
interaction runs here (pipeline.evaluator.Evaluator), so an interaction costs two Kafka messages
instead of about ten. A stage that still fails after the judge's retries dead-letters the interaction
with that stage's name (there is no join to emit it incomplete); an unexpected error is dead-lettered as
stage "evaluate", a message that does not validate as "validate". Relevance (seed 004) is scored here
beside the evaluation, as the staged join does: a failure leaves it out and marks it missing (the row
is written, incomplete), never dead-letters the interaction."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from schemas.errors import JudgeError, StageError
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from streams.context import StreamContext

log = logging.getLogger(__name__)


async def score_relevance(scorer: Any, interaction: Interaction) -> tuple[float | None, float, bool]:
    """(relevance, seconds, failed) of one interaction; a failure is logged, never raised."""
    started = time.perf_counter()
    try:
        value = await scorer.score(interaction.question, interaction.answer)
    except Exception as exc:
        log.warning("relevance of %s failed: %s", interaction.interaction_id, exc)
        return None, time.perf_counter() - started, True
    return float(value), time.perf_counter() - started, False


def with_relevance(evaluation: Evaluation, value: float | None, seconds: float, failed: bool) -> Evaluation:
    """The evaluation with its relevance; a failure is named in ``missing`` (incomplete, as in the join)."""
    update: dict[str, Any] = {
        "relevance": value,
        "stage_seconds": {**evaluation.stage_seconds, "relevance": seconds},
    }
    if failed:
        update["missing"] = [*evaluation.missing, "relevance"]
        update["complete"] = False
    return evaluation.model_copy(update=update)


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.interactions)

    async def handle(event: Any) -> None:
        raw = event.value
        interaction = await ctx.decode_or_dead_letter(raw, Interaction, ctx.names.interactions)
        if interaction is None:
            return
        res = await ctx.res.wait_ready()
        try:
            if res.relevance is None:
                evaluation = await res.evaluator.evaluate(interaction)
            else:
                evaluation, (value, seconds, failed) = await asyncio.gather(
                    res.evaluator.evaluate(interaction), score_relevance(res.relevance, interaction)
                )
                evaluation = with_relevance(evaluation, value, seconds, failed)
        except JudgeError as exc:
            stage = exc.stage if isinstance(exc, StageError) else "evaluate"
            await ctx.dead_letter_judge_error(stage, exc, raw, ctx.names.interactions, interaction)
            return
        await ctx.send(ctx.names.evaluations, interaction.interaction_id, evaluation)

    return ctx.bounded_agent(source, "groundwatch.evaluate", handle, "evaluate", ctx.names.interactions)
