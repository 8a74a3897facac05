"""Sentence conversion stage (docs/method.md): split, then replace pronouns with the judge.

The question, answer and ground truth are split by ``pipeline.sentences.split_sentences``. When
``settings.pipeline.pronoun_replacement`` is on, the answer's and the ground truth's sentences go to
``judge.replace_pronouns`` in batches of ``pronoun_batch_size`` consecutive sentences of one text
(a batch never mixes the answer with the ground truth); all batches run concurrently (the judge
client bounds the calls in flight). A batch for which the judge returns a different number of
sentences keeps its originals, and so does any single sentence the judge returns empty. A batch of one
sentence (a one-sentence answer) is not sent: with no earlier sentence there is nothing to resolve from.
With ``pronoun_prefilter`` (default) neither is a batch none of whose sentences after the first holds an
English pronoun or demonstrative (``ANAPHORS``): there is nothing to replace. Turn it off for answers in
other languages.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence

from pipeline.judges.base import Judge
from pipeline.sentences import split_sentences
from schemas.interaction import Interaction
from schemas.results import Converted, JudgeCall
from schemas.settings import Settings

#: words that may refer back to an earlier sentence (English): a batch without any after its first
#: sentence has nothing for the pronoun prompt to resolve
ANAPHORS = re.compile(
    r"\b(he|she|it|they|him|her|them|his|hers|its|their|theirs|himself|herself|itself|themselves"
    r"|this|these|those|that|former|latter|here|there)\b",
    re.IGNORECASE,
)


def needs_resolution(batch: Sequence[str]) -> bool:
    """True when a sentence after the batch's first holds a word that may refer back (``ANAPHORS``)."""
    return any(ANAPHORS.search(sentence) for sentence in batch[1:])


def batches(items: Sequence[str], size: int) -> list[list[str]]:
    """Consecutive slices of at most ``size`` items."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


async def _replace_batch(
    judge: Judge, batch: list[str], prefilter: bool = True
) -> tuple[list[str], list[JudgeCall]]:
    if len(batch) < 2:
        # the prompt resolves a pronoun from the earlier sentences it is given: one alone has none, so
        # the only right answer is the sentence unchanged, and asking for it is a wasted call
        return batch, []
    if prefilter and not needs_resolution(batch):
        return batch, []
    out = await judge.replace_pronouns(batch)
    replaced = out.value
    if len(replaced) != len(batch):
        return batch, out.calls
    return [new if new and new.strip() else old for old, new in zip(batch, replaced, strict=True)], out.calls


async def replace_pronouns(
    texts: Sequence[list[str]], judge: Judge, batch_size: int, prefilter: bool = True
) -> tuple[list[list[str]], list[JudgeCall]]:
    """Pronoun replacement for each text's sentences; returns the new sentences and the calls."""
    jobs: list[tuple[int, list[str]]] = [
        (index, batch) for index, sentences in enumerate(texts) for batch in batches(sentences, batch_size)
    ]
    results = await asyncio.gather(*(_replace_batch(judge, batch, prefilter) for _, batch in jobs))
    out: list[list[str]] = [[] for _ in texts]
    calls: list[JudgeCall] = []
    for (index, _), (sentences, batch_calls) in zip(jobs, results, strict=True):
        out[index].extend(sentences)
        calls.extend(batch_calls)
    return out, calls


async def convert(interaction: Interaction, judge: Judge, settings: Settings) -> Converted:
    """Split the interaction's texts into sentences and replace pronouns (see the module docstring)."""
    started = time.perf_counter()
    question = split_sentences(interaction.question, settings.split)
    answer = split_sentences(interaction.answer, settings.split)
    ground_truth = split_sentences(interaction.ground_truth, settings.split)
    calls: list[JudgeCall] = []
    if settings.pipeline.pronoun_replacement and (answer or ground_truth):
        (answer, ground_truth), calls = await replace_pronouns(
            [answer, ground_truth],
            judge,
            settings.pipeline.pronoun_batch_size,
            settings.pipeline.pronoun_prefilter,
        )
    return Converted(
        interaction=interaction,
        question_sentences=question,
        answer_sentences=answer,
        ground_truth_sentences=ground_truth,
        calls=calls,
        seconds=time.perf_counter() - started,
    )
