"""One judge call shared by several callers (a batch of texts or cases of concurrent interactions).

Each caller receives, for every call record of the batch, its own ``JudgeCall`` with ``items`` = its
share's count, input/output tokens apportioned by that share (largest remainder, so the callers' tokens
add up exactly to the call's), ``cost_usd`` proportional, and the call's full ``latency_ms`` and
``wall_ms``. Only the first caller keeps the call's ``attempts``; the others get ``attempts=0`` (they
made no request of their own), and ``Evaluation.judge_calls`` counts only records with attempts, so
summing ``judge_calls`` over interactions counts each request once.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.results import JudgeCall


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split ``total`` by ``weights`` into integers that add up to ``total`` (largest remainder)."""
    whole = sum(weights)
    if whole <= 0:
        return [0 for _ in weights]
    exact = [total * w / whole for w in weights]
    shares = [int(x) for x in exact]
    left = total - sum(shares)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[:left]:
        shares[i] += 1
    return shares


def share_calls(calls: Sequence[JudgeCall], counts: Sequence[int]) -> list[list[JudgeCall]]:
    """The records each owner of ``counts[i]`` texts of a batch receives (module docstring)."""
    total = sum(counts)
    out: list[list[JudgeCall]] = [[] for _ in counts]
    for call in calls:
        inputs = apportion(call.input_tokens, counts)
        outputs = apportion(call.output_tokens, counts)
        for i, count in enumerate(counts):
            out[i].append(
                call.model_copy(
                    update={
                        "items": count,
                        "input_tokens": inputs[i],
                        "output_tokens": outputs[i],
                        "cost_usd": call.cost_usd * count / total if total else 0.0,
                        "attempts": call.attempts if i == 0 else 0,
                    }
                )
            )
    return out
