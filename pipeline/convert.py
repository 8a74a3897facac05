"""Sentence conversion stage (docs/method.md): split, then replace pronouns with the judge.

The question, answer and ground truth are split by ``pipeline.sentences.split_sentences``; with
``citations.enabled`` the answer's citation markers are removed first and what each answer sentence cites
is kept in ``Converted.citations`` (``pipeline.citations``). When
``settings.pipeline.pronoun_replacement`` is on, the answer's and the ground truth's sentences go to
``judge.replace_pronouns`` in batches of ``pronoun_batch_size`` consecutive sentences of one text
(a batch never mixes the answer with the ground truth); all batches run concurrently (the judge
client bounds the calls in flight). A batch for which the judge returns a different number of
sentences keeps its originals, and so does any single sentence the judge returns empty. A batch of one
sentence (a one-sentence answer) is not sent: with no earlier sentence there is nothing to resolve from.
With ``pronoun_prefilter`` (default) neither is a batch none of whose sentences after the first holds an
English pronoun or demonstrative (``ANAPHORS``): there is nothing to replace. Turn it off for answers in
other languages.

Conversations: when the interaction has a history (the turns before its question), its most recent
user and assistant turns (``pronoun_history_turns``, ``pronoun_history_chars``; system turns never) go
with every batch as context to resolve from, so a follow-up's "it" resolves. The question's sentences
are then rewritten too (from the history: "and how much does it cost?" names what "it" is), and the
answer's and ground truth's from the history followed by the question. With that context a lone
sentence is sent, and the prefilter looks at every sentence of a batch, its first too. Without history
nothing changes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

from pipeline.citations import read_citations
from pipeline.clock import Stopwatch
from pipeline.evidence import evidence
from pipeline.judges.base import Judge
from pipeline.sentences import split_sentences
from prompts.models import PronounTurn
from schemas.interaction import Interaction, interaction_digest, recent_turns
from schemas.results import Converted, JudgeCall
from schemas.settings import Settings

#: words that may refer back to an earlier sentence (English): a batch without any after its first
#: sentence has nothing for the pronoun prompt to resolve
ANAPHORS = re.compile(
    r"\b(he|she|it|they|him|her|them|his|hers|its|their|theirs|himself|herself|itself|themselves"
    r"|this|these|those|that|former|latter|here|there)\b",
    re.IGNORECASE,
)


def needs_resolution(batch: Sequence[str], from_first: bool = False) -> bool:
    """True when a sentence after the batch's first (every sentence, ``from_first``) holds a word that
    may refer back (``ANAPHORS``)."""
    return any(ANAPHORS.search(sentence) for sentence in batch[0 if from_first else 1 :])


def batches(items: Sequence[str], size: int) -> list[list[str]]:
    """Consecutive slices of at most ``size`` items."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def pronoun_history(interaction: Interaction, settings: Settings) -> list[PronounTurn]:
    """The conversation turns the pronoun prompt may resolve from: the history's user and assistant
    turns, the most recent that fit ``pronoun_history_turns`` and ``pronoun_history_chars``."""
    pipe = settings.pipeline
    spoken = [turn for turn in interaction.history if turn.role != "system"]
    kept, _ = recent_turns(spoken, pipe.pronoun_history_turns, pipe.pronoun_history_chars)
    return [PronounTurn(role="user" if t.role == "user" else "assistant", text=t.content) for t in kept]


async def _replace_batch(
    judge: Judge, batch: list[str], prefilter: bool = True, history: Sequence[PronounTurn] = ()
) -> tuple[list[str], list[JudgeCall]]:
    if len(batch) < 2 and not history:
        # the prompt resolves a pronoun from the earlier sentences it is given: one alone has none, so
        # the only right answer is the sentence unchanged, and asking for it is a wasted call
        return batch, []
    if prefilter and not needs_resolution(batch, from_first=bool(history)):
        return batch, []
    out = await judge.replace_pronouns(batch, history)
    replaced = out.value
    if len(replaced) != len(batch):
        return batch, out.calls
    return [new if new and new.strip() else old for old, new in zip(batch, replaced, strict=True)], out.calls


async def replace_pronouns(
    texts: Sequence[list[str]],
    judge: Judge,
    batch_size: int,
    prefilter: bool = True,
    histories: Sequence[Sequence[PronounTurn]] | None = None,
) -> tuple[list[list[str]], list[JudgeCall]]:
    """Pronoun replacement for each text's sentences (with ``histories[i]``, the turns text ``i``
    continues); returns the new sentences and the calls."""
    contexts: Sequence[Sequence[PronounTurn]] = histories if histories is not None else [()] * len(texts)
    jobs: list[tuple[int, list[str]]] = [
        (index, batch) for index, sentences in enumerate(texts) for batch in batches(sentences, batch_size)
    ]
    results = await asyncio.gather(
        *(_replace_batch(judge, batch, prefilter, contexts[index]) for index, batch in jobs)
    )
    out: list[list[str]] = [[] for _ in texts]
    calls: list[JudgeCall] = []
    for (index, _), (sentences, batch_calls) in zip(jobs, results, strict=True):
        out[index].extend(sentences)
        calls.extend(batch_calls)
    return out, calls


async def convert(
    interaction: Interaction, judge: Judge, settings: Settings, originals: Mapping[str, str] | None = None
) -> Converted:
    """Split the interaction's texts into sentences and replace pronouns (see the module docstring).
    ``originals``: the values behind the placeholders of a masked interaction (``privacy.mode`` judge),
    carried to ``assemble``, which puts them back."""
    watch = Stopwatch()
    question = split_sentences(interaction.question, settings.split)
    citations = None
    if settings.citations.enabled:  # markers removed before the answer is split and judged
        answer, citations = read_citations(
            interaction.answer,
            interaction.citations,
            evidence(interaction, settings.tools),
            settings.split,
            settings.citations.max_markers,
        )
    else:
        answer = split_sentences(interaction.answer, settings.split)
    ground_truth = split_sentences(interaction.ground_truth, settings.split)
    calls: list[JudgeCall] = []
    pipe = settings.pipeline
    first = pipe.refusal_sentences  # the refusal stage's texts, from this split (before replacement)
    refusal_texts = [" ".join(answer[:first])]
    if interaction.ground_truth is not None:
        refusal_texts.append(" ".join(ground_truth[:first]))
    history = pronoun_history(interaction, settings) if pipe.pronoun_replacement else []
    if history:
        # a follow-up: the question resolves from the history, the answer and ground truth from both
        after_question = [*history, PronounTurn(role="user", text=interaction.question)]
        (question, answer, ground_truth), calls = await replace_pronouns(
            [question, answer, ground_truth],
            judge,
            pipe.pronoun_batch_size,
            pipe.pronoun_prefilter,
            [history, after_question, after_question],
        )
    elif pipe.pronoun_replacement and (answer or ground_truth):
        (answer, ground_truth), calls = await replace_pronouns(
            [answer, ground_truth], judge, pipe.pronoun_batch_size, pipe.pronoun_prefilter
        )
    return Converted(
        interaction=interaction,
        digest=interaction_digest(interaction),
        question_sentences=question,
        answer_sentences=answer,
        citations=citations,
        ground_truth_sentences=ground_truth,
        refusal_texts=refusal_texts,
        calls=calls,
        seconds=watch.seconds(),
        originals=dict(originals or {}),
    )
