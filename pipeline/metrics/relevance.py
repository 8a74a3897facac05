"""Relevance (docs/method.md): cosine similarity of the last user message and the answer, from embeddings.

The last user message is the interaction's question: for a conversation sent as ``messages``, its last
user turn, as written (earlier turns are not embedded: relevance asks whether the answer addresses what
was just asked). A question given as one transcript text ("User: ...\nAssistant: ...") is cut to its
last user turn (``last_user_message``).

The embeddings are ``pipeline.embeddings.TextEncoder``'s (all-MiniLM-L6-v2, shipped in a package; the
optional ``embeddings`` extra): without the extra, the first use raises ``EmbeddingsUnavailable`` saying
how to install it. The encoder runs in a worker thread (``asyncio.to_thread``) so the event loop never
blocks; one model is loaded per scorer, on first use.

One path scores relevance everywhere (``groundwatch eval``, the fused processor and the staged join all
call ``score_relevance``), with one failure behaviour: a failing score is logged and leaves relevance
out, named in the evaluation's ``missing`` (the row is kept, incomplete); it never fails the
interaction. A missing extra is found before anything is scored (``RelevanceScorer.require``): the
command or worker stops with one line saying how to install it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import NamedTuple, Protocol

from pipeline.clock import Stopwatch
from pipeline.embeddings import TextEncoder
from schemas.interaction import Interaction

log = logging.getLogger(__name__)

def last_user_message(question: str) -> str:
    """The last user turn of a question that may hold a conversation ("User: ...\\nAssistant: ...").

    Lines starting with ``user:`` / ``human:`` / ``q:`` mark user turns; without such markers the whole
    question is the last user message (as it is for a question taken from ``messages``, unless that
    turn itself holds such lines).
    """
    turns = re.split(r"(?im)^\s*(?:user|human|q)\s*:\s*", question)
    if len(turns) > 1:
        last = turns[-1]
        last = re.split(r"(?im)^\s*(?:assistant|ai|bot|a)\s*:\s*", last)[0]
        return last.strip() or question.strip()
    return question.strip()


def relevance_question(interaction: Interaction) -> str:
    """What relevance compares the answer with: the question of a conversation sent as ``messages`` is
    already its last user turn (taken as written, even if it holds "Q:" lines); a question given as one
    transcript text is cut to its last user turn (``last_user_message``)."""
    return interaction.question if interaction.history else last_user_message(interaction.question)


class RelevanceScorer:
    """``await scorer.score(question, answer)`` -> cosine in [-1, 1] (about [0, 1] for real text); pass
    the question as ``relevance_question`` gives it."""

    def __init__(self, device: str = "cpu") -> None:
        self.encoder = TextEncoder(device)

    def require(self) -> None:
        """Raise ``EmbeddingsUnavailable`` now if the embeddings extra is not installed (the model itself
        is loaded on first use)."""
        self.encoder.require()

    def _cosine(self, question: str, answer: str) -> float:
        vectors = self.encoder.encode([question, answer])
        return float(sum(float(a) * float(b) for a, b in zip(vectors[0], vectors[1], strict=True)))

    async def score(self, question: str, answer: str) -> float:
        if not question.strip() or not answer.strip():
            return 0.0
        return await asyncio.to_thread(self._cosine, question, answer)


class RelevanceScorerLike(Protocol):
    """What scoring needs of a relevance scorer (``RelevanceScorer``, or a test's)."""

    async def score(self, question: str, answer: str) -> float: ...


class RelevanceScore(NamedTuple):
    value: float | None  # None when it failed
    seconds: float
    failed: bool


async def score_relevance(scorer: RelevanceScorerLike, interaction: Interaction) -> RelevanceScore:
    """The interaction's relevance (module docstring): a failure is logged and returned, never raised."""
    watch = Stopwatch()
    try:
        value = await scorer.score(relevance_question(interaction), interaction.answer)
    except Exception as exc:
        log.warning("relevance of %s failed: %s", interaction.interaction_id, exc)
        return RelevanceScore(None, watch.seconds(), True)
    return RelevanceScore(float(value), watch.seconds(), False)
