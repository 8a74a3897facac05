"""Graded verdicts: the probability the judge gave each NLI verdict, read from token log-probabilities.

An NLI answer is JSON with one ``"verdict": "entailed" | "contradicted" | "not_stated"`` per statement.
When the server returns token log-probabilities (OpenAI's and llama.cpp's ``logprobs`` with
``top_logprobs``), the token that starts each verdict's value carries the model's alternatives at that
point: "ent" for entailed, "contr" for contradicted, "not" for not_stated. Their probabilities,
renormalised over the three verdicts, grade the statement: its score becomes the expected
``VERDICT_SCORE`` under that distribution (P(entailed) with the default scores), so a ranking metric
(AUC) sees how sure the judge was instead of three values.

Pure functions over the tokens; ``None`` where the tokens do not allow a distribution (no logprobs,
a verdict count that does not match the parsed answer, no alternative naming a verdict): the caller keeps
the verdict's fixed score then.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeGuard, overload

VERDICTS: tuple[str, ...] = ("entailed", "contradicted", "not_stated")
_VERDICT_KEY = re.compile(r'"verdict"\s*:\s*"')


class TokenLogprob(NamedTuple):
    """One generated token, its log-probability and the top alternatives at its position.

    ``top`` holds the alternatives as read; a token from ``parse_logprobs`` keeps the server's raw list in
    ``raw_top`` instead and reads it only when asked (``alternatives``): only the token that starts a
    verdict's value is ever looked at, and reading every token's list cost most of a graded call."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    raw_top: Sequence[Any] = ()

    def alternatives(self) -> tuple[tuple[str, float], ...]:
        """``top``, else the usable entries of ``raw_top`` (a token name and a finite log-probability)."""
        if self.top or not self.raw_top:
            return self.top
        return tuple(
            (alt["token"], float(alt["logprob"]))
            for alt in self.raw_top
            if isinstance(alt, Mapping) and isinstance(alt.get("token"), str) and _finite(alt.get("logprob"))
        )


class GeneratedTokens(Sequence[TokenLogprob]):
    """The tokens of a chat-completions choice's ``logprobs.content`` as the server sent them: ``texts``
    read at once, each token's log-probability and alternatives only when it is asked for (``[i]``). A
    graded answer is hundreds of tokens and a verdict looks at one of them: building every token cost
    most of a graded call."""

    __slots__ = ("_items", "texts")

    def __init__(self, texts: list[str], items: list[Mapping[str, Any]]) -> None:
        self.texts = texts
        self._items = items

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, index: int) -> TokenLogprob: ...

    @overload
    def __getitem__(self, index: slice) -> list[TokenLogprob]: ...

    def __getitem__(self, index: int | slice) -> TokenLogprob | list[TokenLogprob]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        item = self._items[index]
        logprob = item.get("logprob")
        raw_top = item.get("top_logprobs")
        # a chosen token without a usable log-probability keeps its place in the text (the tokens spell
        # the answer) but carries no probability mass: -inf, never a certain 0.0
        if type(logprob) is not float or not -math.inf < logprob < math.inf:
            logprob = float(logprob) if _finite(logprob) else -math.inf
        return TokenLogprob(self.texts[index], logprob, (), raw_top if type(raw_top) is list else ())


def parse_logprobs(choice: Mapping[str, Any]) -> Sequence[TokenLogprob]:
    """The tokens of a chat-completions choice's ``logprobs.content`` (empty when absent or malformed:
    a token without its text); each is read when asked (``GeneratedTokens``), its alternatives when
    asked again (``TokenLogprob.alternatives``)."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content:
        return []
    try:
        texts = [item["token"] for item in content]
    except (TypeError, KeyError, IndexError):  # an entry that is not an object with a token
        return []
    if not all(type(text) is str or isinstance(text, str) for text in texts) or not all(
        type(item) is dict or isinstance(item, Mapping) for item in content
    ):
        return []
    return GeneratedTokens(texts, content)


def _finite(value: object) -> TypeGuard[float]:
    """A real, finite number (a log-probability a server may have left null, NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _verdict_of(fragment: str) -> str | None:
    """The verdict a value fragment starts (``"ent"`` -> entailed); None when empty or ambiguous."""
    if not fragment:
        return None
    found = [v for v in VERDICTS if v.startswith(fragment) or fragment.startswith(v)]
    return found[0] if len(found) == 1 else None


def _distribution(token: TokenLogprob, prefix: str) -> dict[str, float] | None:
    """Verdict probabilities at one token; ``prefix``: the token's text before the value starts."""
    mass = dict.fromkeys(VERDICTS, 0.0)
    alternatives = token.alternatives() or ((token.token, token.logprob),)
    if all(text != token.token for text, _ in alternatives):
        alternatives = ((token.token, token.logprob), *alternatives)
    for text, logprob in alternatives:
        if not text.startswith(prefix):
            continue
        verdict = _verdict_of(text[len(prefix) :])
        if verdict is not None:
            mass[verdict] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return {v: m / total for v, m in mass.items()}


def verdict_distributions(tokens: Sequence[TokenLogprob]) -> list[dict[str, float] | None]:
    """One distribution over VERDICTS per ``"verdict"`` value in the generated text, in text order."""
    texts = tokens.texts if isinstance(tokens, GeneratedTokens) else [token.token for token in tokens]
    starts = [0, *itertools.accumulate(map(len, texts))]  # where each token starts; last: the text's end
    text = "".join(texts)
    out: list[dict[str, float] | None] = []
    for match in _VERDICT_KEY.finditer(text):
        value_at = match.end()
        if value_at >= starts[-1]:
            out.append(None)
            continue
        index = bisect.bisect_right(starts, value_at, 0, len(texts)) - 1  # the token the value starts in
        out.append(_distribution(tokens[index], text[starts[index] : value_at]))
    return out


def graded_scores(
    tokens: Sequence[TokenLogprob], verdict_count: int, scores: Mapping[str, float]
) -> list[float | None]:
    """The expected score of each of ``verdict_count`` verdicts (in answer order) under its distribution;
    all None when the text holds another number of verdicts than the parsed answer."""
    dists = verdict_distributions(tokens)
    if len(dists) != verdict_count:
        return [None] * verdict_count
    return [None if d is None else sum(p * scores[v] for v, p in d.items()) for d in dists]
