"""Grounded-unit precision and unsupported claims (docs/method.md).

The verifiable units are the statements of the ``context_answer`` pair (every statement of every
answer hypothesis); a hypothesis the judge returned without statements counts as one unit with the
hypothesis's own score and no tag. Precision = sum(weight * score) / sum(weight) over the units,
with partial credit (a statement's score is in [0, 1]) and ``weight = statement_weights[tag]``
(tags compared case-insensitively, 1.0 for a tag without a weight). For example (docs/method.md): four units,
three supported and one at 0.6 -> (3 + 0.6) / 4 = 0.9. None when there is no unit or no weight.
"""

from __future__ import annotations

from collections.abc import Mapping

from schemas.results import PairResult


def units(pair: PairResult | None) -> list[tuple[str, float, str]]:
    """(text, score, tag) of every verifiable unit of a pair."""
    if pair is None:
        return []
    out: list[tuple[str, float, str]] = []
    for hypothesis in pair.hypotheses:
        if hypothesis.statements:
            out.extend((s.statement, s.score, s.tag) for s in hypothesis.statements)
        else:
            out.append((hypothesis.hypothesis, hypothesis.score, ""))
    return out


def grounded_precision(pair: PairResult | None, weights: Mapping[str, float] | None = None) -> float | None:
    """Weighted share of the pair's units that the premise supports, with partial credit."""
    table = {k.lower(): v for k, v in (weights or {}).items()}
    total = 0.0
    supported = 0.0
    for _, score, tag in units(pair):
        weight = table.get(tag.lower(), 1.0)
        total += weight
        supported += weight * score
    if total <= 0.0:
        return None
    return supported / total


def unsupported_claims(pair: PairResult | None, threshold: float) -> list[str]:
    """Units scoring under ``threshold``, in order, each text once."""
    return list(dict.fromkeys(text for text, score, _ in units(pair) if score < threshold))
