"""Sampling where interactions enter judging (the convert processor, or the fused evaluate processor).

``skip_unsampled`` asks the worker's ``pipeline.sampling.Sampler`` about an interaction, counts the
decision (``groundwatch_interactions_received`` / ``_sampled`` / ``_skipped`` by app and reason) and,
when it is not to be judged, sends its unjudged Evaluation (``judged=False`` and the skip reason)
straight to the evaluations topic: it is stored and counted in its window like any other, never
dead-lettered, and costs no judge call. The judge spend that budgets count is recorded when the sink
writes evaluations (``Resources``), so a budget is per worker process.
"""

from __future__ import annotations

from pipeline.sampling import Sampler, skipped_evaluation
from schemas.interaction import Interaction
from streams.context import StreamContext


async def skip_unsampled(ctx: StreamContext, sampler: Sampler, interaction: Interaction) -> bool:
    """True when the interaction is not judged (its unjudged Evaluation has been sent)."""
    decision = sampler.decide(interaction)
    ctx.metrics.sampling(interaction.app, decision.judge, decision.reason)
    if decision.judge:
        return False
    evaluation = skipped_evaluation(interaction, decision.reason, ctx.settings.judge.kind, ctx.clock.now())
    await ctx.send(ctx.names.evaluations, interaction.interaction_id, evaluation)
    return True
