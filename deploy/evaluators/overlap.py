"""A python evaluator for groundwatch: how much of the answer's vocabulary comes from the retrieved context.

``answer_in_context(interaction)`` returns the share of the answer's content words (letters or digits,
three characters or more, not among the commonest English words) that appear in the contexts, with the
words that do not. An answer that brings in names and numbers of its own scores low: a cheap signal of
drift beside the judge's verdicts (in ``make demo`` it falls with the wiki-qa / beta drift).
"""

from __future__ import annotations

import re
from typing import Any

_WORD = re.compile(r"[^\W_]{3,}")
_COMMON = frozenset(
    "the and for are was were with that this from have has had not but you your they their there what which "
    "when where who how can could would should will also into than then them these those its our out all "
    "any one two about after before over under more most some such only other been being very just".split()
)


def _words(text: str) -> set[str]:
    return {w for w in (m.casefold() for m in _WORD.findall(text)) if w not in _COMMON}


def answer_in_context(interaction: Any) -> dict[str, Any]:
    answer = _words(interaction.answer)
    if not answer or not interaction.contexts:
        return {"score": 1.0, "reason": "no content words or no context"}
    context = _words(" ".join(p.text for p in interaction.contexts))
    outside = sorted(answer - context)
    return {
        "score": 1 - len(outside) / len(answer),
        "reason": f"{len(outside)} of {len(answer)} words not in the context: {', '.join(outside[:8])}",
    }
