"""Ground truths given as alternatives, and exact match of short answers.

Alternatives
    QA sets often give several acceptable short answers. A ground truth is a list of alternatives when
    the interaction's ``metadata["gold_answers"]`` is a list of strings (at least one non-blank), or when
    the ground truth is one line that `` | `` (space, bar, space) splits into two or more non-blank
    parts (a markdown table row, which starts with ``|``, is not). The hypothesis "the answer agrees with
    the ground truth" is then ONE hypothesis that holds when ANY alternative holds: its score is the
    maximum over the alternatives (``pipeline.nli`` judges each alternative and keeps the best).

Exact match (Trust-Eval's EM, SQuAD normalisation)
    An alternative matches an answer when the normalised alternative occurs in the normalised answer as
    whole words (lower case, punctuation and the articles a/an/the removed, single spaces), or its
    content tokens (``pipeline.text_normalise.normalise_text``: stems, canonical numbers, "67 million" =
    "67,000,000") occur, in order and adjacent, among the answer's. A matched alternative is entailed
    by the answer without asking the judge. A short answer (one that normalises to the same string as
    an alternative) is also entailed by it.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Sequence

from pipeline.refusal_phrases import is_refusal
from pipeline.text_normalise import normalise_text
from schemas.interaction import Interaction

ALTERNATIVE_SEPARATOR = " | "
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({ch: " " for ch in string.punctuation})
_PUNCT_REMOVED = str.maketrans("", "", string.punctuation)


def split_alternatives(ground_truth: str | None) -> list[str]:
    """``"a | b | c"`` -> ``["a", "b", "c"]``; [] when the text is not a one-line list of 2+ alternatives."""
    if ground_truth is None:
        return []
    text = ground_truth.strip()
    if "\n" in text or ALTERNATIVE_SEPARATOR not in text or text.startswith("|") or text.endswith("|"):
        return []
    parts = list(dict.fromkeys(p.strip() for p in text.split(ALTERNATIVE_SEPARATOR) if p.strip()))
    return parts if len(parts) >= 2 else []


def ground_truth_alternatives(interaction: Interaction) -> list[str]:
    """The interaction's ground-truth alternatives (see the module docstring); [] when it has none."""
    if interaction.ground_truth is None or not interaction.ground_truth.strip():
        return []
    meta = interaction.metadata.get("gold_answers")
    if isinstance(meta, list) and meta and all(isinstance(g, str) for g in meta):
        golds = list(dict.fromkeys(g.strip() for g in meta if g.strip()))
        if golds:
            return golds
    return split_alternatives(interaction.ground_truth)


def squad_normalise(text: str, *, split_on_punctuation: bool = True) -> str:
    """SQuAD normalisation: lower case, punctuation and articles removed, single spaces. A punctuation
    mark becomes a space ("state-of-the-art" is three words), or, with ``split_on_punctuation`` False,
    is dropped as SQuAD's own evaluation script does ("U.S." is "us"; Trust-Eval's exact match)."""
    text = text.lower().translate(_PUNCT if split_on_punctuation else _PUNCT_REMOVED)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_normalised(text: str, gold: str, *, split_on_punctuation: bool = True) -> bool:
    """True when ``gold`` occurs in ``text`` as whole words, both SQuAD-normalised; never for a gold
    answer that normalises to nothing."""
    wanted = squad_normalise(gold, split_on_punctuation=split_on_punctuation)
    return bool(wanted) and f" {wanted} " in f" {_squad(text, split_on_punctuation)} "


#: an answer with one of these is not decided by containment: "It is not Paris, it is Lyon" contains "Paris"
_NEGATION = re.compile(r"\b(not|no|never|neither|nor|cannot|none|nobody|nothing)\b|n't\b", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def _negates_or_refuses(answer: str) -> bool:
    """Once per answer, however many ground-truth alternatives it is compared with."""
    return bool(_NEGATION.search(answer)) or is_refusal(answer)


@functools.lru_cache(maxsize=256)
def _squad(text: str, split_on_punctuation: bool) -> str:
    """Once per answer, however many alternatives it is compared with."""
    return squad_normalise(text, split_on_punctuation=split_on_punctuation)


def exact_match(answer: str, alternative: str) -> bool:
    """True when the alternative occurs in the answer as whole normalised words or content tokens.

    Never for an answer that negates or refuses (the judge decides those), nor for a gold answer without
    a content word ("No.", "it"), which would match almost anything."""
    if _negates_or_refuses(answer) or not normalise_text(alternative):
        return False
    if contains_normalised(answer, alternative):
        return True
    gold_tokens = normalise_text(alternative)
    return bool(gold_tokens) and f" {gold_tokens} " in f" {normalise_text(answer)} "


def same_answer(answer: str, alternatives: Sequence[str]) -> str | None:
    """The alternative a short answer is equal to after normalisation (either normalisation), else None."""
    plain = squad_normalise(answer)
    tokens = normalise_text(answer)
    for alternative in alternatives:
        if plain and plain == squad_normalise(alternative):
            return alternative
        if tokens and tokens == normalise_text(alternative):
            return alternative
    return None
