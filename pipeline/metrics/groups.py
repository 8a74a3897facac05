"""Groups of cases that are not independent: cases sharing a question or a source passage.

Cross-validation keeps a group in one fold (``pipeline.metrics.crossval.grouped_folds``) and the
bootstrap resamples whole groups (``pipeline.metrics.bootstrap``), so neither counts a question or a
passage twice as if it were two pieces of evidence.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def group_keys(questions: Sequence[str], first_contexts: Sequence[str]) -> list[int]:
    """A group id per case: connected components of (normalised question, first 60 characters of the
    first context); a question shared by over half of the cases (a fixed instruction) is no key."""
    q_norm = [_norm(q) for q in questions]
    counts: dict[str, int] = {}
    for q in q_norm:
        counts[q] = counts.get(q, 0) + 1
    parent = list(range(len(questions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[Hashable, int] = {}
    for i, (q, c) in enumerate(zip(q_norm, first_contexts, strict=True)):
        keys: list[Hashable] = []
        if q and counts[q] * 2 <= len(questions):
            keys.append(("q", q))
        if c.strip():
            keys.append(("c", _norm(c)[:60]))
        for key in keys:
            if key in first:
                parent[find(i)] = find(first[key])
            else:
                first[key] = i
    roots: dict[int, int] = {}
    return [roots.setdefault(find(i), len(roots)) for i in range(len(questions))]
