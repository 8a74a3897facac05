"""Conversations, pure: when one closes on event time, and its rollup from its stored turns.

A conversation is (app, model, conversation_id). ``OpenConversations`` tracks the ones with new turns:
one is due when the event-time watermark of its app and model (the latest event time of any of their
rows, in a conversation or not, each taken at most wall clock + ``max_skew``) is ``idle`` past its last
turn, when a turn marked its end (``metadata.conversation_end``), or, on a stream gone quiet, when no turn
of it has arrived for ``quiet`` (default ``idle``) on the wall clock and its last turn is ``idle`` in the
past. Closing does not forget:
a later turn opens it again and its rollup is computed again from every stored turn.

``rollup`` computes the outcome from the turns (deduplicated, any order): turns, judged turns,
hallucinated turns, refusals, whether it ended unresolved (the last judged answer a refusal or
hallucinated), re-asked turns (``reasks``) and self-contradictions (``contradictions``), tokens, cost and
the worst turn. An interaction without a conversation_id is a conversation of one turn (``single``).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeline.text_normalise import tokens_of
from schemas.conversation import ConversationFigures, ConversationRollup, ConversationTurn, marks_end
from schemas.errors import ConversationError
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.metrics import CONVERSATION_SCORED, JUDGED_CONVERSATIONS, Metric

ConversationKey = tuple[str, str, str]  # app, model, conversation_id

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def content_words(text: str) -> frozenset[str]:
    """The stemmed content words, names and numbers of a text (stopwords dropped)."""
    return frozenset(t.norm for t in tokens_of(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def reasks(questions: Sequence[str], similarity: float) -> list[bool]:
    """For each user turn (in order), whether it asks again what an earlier one asked: the Jaccard
    similarity of their content words reaches ``similarity`` (as ``reask_verdicts``, without comparing
    every pair: ``SimilarEarlier``)."""
    sets = [content_words(q) for q in questions]
    earlier = SimilarEarlier(similarity, sets)
    seen: set[frozenset[str]] = set()
    out = []
    for words in sets:
        out.append(bool(words) and (words in seen or earlier.find(words) is not None))
        if words and words not in seen:  # each distinct set indexed once
            seen.add(words)
            earlier.add(words, words)
    return out


class SimilarEarlier:
    """Sets added one by one, and for a new set the first earlier one whose Jaccard similarity with it
    reaches ``threshold`` (0 < threshold <= 1), without comparing it with every earlier set: prefix
    filtering (Chaudhuri et al. 2006; Xiao et al.'s PPJoin, 2008). Two sets of Jaccard similarity >= t
    share a token among the first ``|x| - ceil(t |x|) + 1`` tokens of each in one fixed order of tokens,
    and their sizes are within a factor t; only those prefix tokens are indexed. A set's tokens are put
    in order rarest first among ``every`` set (the conversation's), so the prefixes hold the rare tokens
    and the lists of sets by token stay short. ``payload`` is what ``find`` hands back with a match; a
    ``check`` given to ``find`` must also hold for it to count."""

    def __init__(self, threshold: float, every: Iterable[frozenset[str]] = ()) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"a Jaccard threshold is in (0, 1], not {threshold}")
        self.threshold = threshold
        self._count: Counter[str] = Counter(token for tokens in every for token in tokens)
        self._by_token: dict[str, list[int]] = defaultdict(list)
        self._sets: list[tuple[frozenset[str], Any]] = []

    def _prefix(self, tokens: frozenset[str]) -> list[str]:
        ordered = sorted(tokens, key=lambda t: (self._count[t], t))
        keep = len(ordered) - math.ceil(self.threshold * len(ordered) - 1e-9) + 1
        return ordered[:keep]

    def add(self, tokens: frozenset[str], payload: Any) -> None:
        if not tokens:
            return
        index = len(self._sets)
        self._sets.append((tokens, payload))
        for token in self._prefix(tokens):
            self._by_token[token].append(index)

    def find(self, tokens: frozenset[str], check: Callable[[Any], bool] | None = None) -> Any | None:
        """The payload of the first earlier set similar to ``tokens`` (and passing ``check``), or None."""
        if not tokens:
            return None
        t, size, seen = self.threshold, len(tokens), set()
        for token in self._prefix(tokens):
            for index in self._by_token.get(token, ()):
                if index in seen:
                    continue
                seen.add(index)
                other, payload = self._sets[index]
                if not t * size <= len(other) * (1 + 1e-9) or not t * len(other) <= size * (1 + 1e-9):
                    continue
                if jaccard(tokens, other) >= t and (check is None or check(payload)):
                    return payload
        return None


#: (earlier, later): indices of two turns of a conversation in its order
Pair = tuple[int, int]


def flagged(n: int, verdicts: dict[Pair, bool]) -> list[bool]:
    """For each of ``n`` turns, whether some pair with it as the later one is positive."""
    out = [False] * n
    for (_, later), positive in verdicts.items():
        out[later] = out[later] or positive
    return out


def candidates(texts: Sequence[str], floor: float, lexical: dict[Pair, bool], cap: int) -> list[Pair]:
    """The pairs of ``texts`` (earlier, later) worth a judge's look: the Jaccard similarity of their
    content words reaches ``floor``, or the lexical rule flags them; the ``cap`` most similar (lexically
    flagged first), in conversation order."""
    words = [content_words(t) for t in texts]
    scored = []
    for j in range(len(texts)):
        for i in range(j):
            if not words[i] or not words[j]:
                continue
            similarity = jaccard(words[i], words[j])
            if similarity >= floor or lexical.get((i, j), False):
                scored.append((not lexical.get((i, j), False), -similarity, (i, j)))
    return sorted(pair for _, _, pair in sorted(scored)[:cap])


def reask_verdicts(questions: Sequence[str], similarity: float) -> dict[Pair, bool]:
    """The lexical verdict of every pair of user turns: their content words' Jaccard similarity reaches
    ``similarity``."""
    words = [content_words(q) for q in questions]
    return {
        (i, j): bool(words[i]) and bool(words[j]) and jaccard(words[i], words[j]) >= similarity
        for j in range(len(words))
        for i in range(j)
    }


@dataclass(frozen=True)
class Claim:
    """One sentence of an answer: what it is about (its words) and the values it gives (numbers and
    names past the sentence's first word)."""

    subject: frozenset[str]
    values: frozenset[str]


def claims(answer: str) -> list[Claim]:
    out = []
    for sentence in _SENTENCE.split(answer):
        tokens = tokens_of(sentence)
        subject: set[str] = set()
        values: set[str] = set()
        for i, token in enumerate(tokens):
            if token.kind == "number" or (token.kind == "name" and i > 0):
                values.add(token.norm)
            else:
                subject.add(token.norm)
        if values and subject:
            out.append(Claim(frozenset(subject), frozenset(values)))
    return out


#: two sentences are about the same subject when their words overlap at least this much
SAME_SUBJECT = 0.6


def contradicts(answer: Sequence[Claim], earlier: Sequence[Claim]) -> bool:
    """Some sentence of ``answer`` gives, for a subject an earlier sentence spoke of, a value the earlier
    one did not and lacks one it gave (the value changed, not added to)."""
    return any(
        changed(a, b) and jaccard(a.subject, b.subject) >= SAME_SUBJECT for a in answer for b in earlier
    )


def contradiction_verdicts(answers: Sequence[str]) -> dict[Pair, bool]:
    """The lexical verdict of every pair of answers: the later contradicts the earlier."""
    found = [claims(a) for a in answers]
    return {(i, j): contradicts(found[j], found[i]) for j in range(len(answers)) for i in range(j)}


def contradictions(answers: Sequence[str]) -> list[bool]:
    """For each answer (in order), whether it contradicts an earlier answer of the conversation (as
    ``contradiction_verdicts``, without comparing every pair: the earlier claims about a similar subject
    are found by ``SimilarEarlier``, each distinct claim indexed once)."""
    found_in = [claims(a) for a in answers]
    earlier = SimilarEarlier(SAME_SUBJECT, (c.subject for found in found_in for c in found))
    indexed: set[Claim] = set()
    out = []
    for found in found_in:
        out.append(any(earlier.find(a.subject, functools.partial(changed, a)) is not None for a in found))
        for claim in found:
            if claim not in indexed:
                indexed.add(claim)
                earlier.add(claim.subject, claim)
    return out


def changed(a: Claim, b: Claim) -> bool:
    """``a`` gives a value ``b`` did not and lacks one ``b`` gave (the value changed, not added to)."""
    return bool(a.values - b.values) and bool(b.values - a.values)


def _order(turn: ConversationTurn) -> tuple[datetime, str]:
    return turn.timestamp, turn.interaction_id


def in_order(turns: Sequence[ConversationTurn]) -> list[ConversationTurn]:
    """The turns in conversation order (event time, then interaction id)."""
    return sorted(turns, key=_order)


@dataclass(frozen=True)
class PairVerdicts:
    """Re-asks and self-contradictions decided elsewhere (the LLM judge: pipeline.conversation_judge),
    one flag per turn in conversation order (``in_order``), and what deciding them cost."""

    reasked: Sequence[bool]
    contradicted: Sequence[bool]
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    failure: str = ""
    by_llm: tuple[str, ...] = ()  # the kinds (REASKS, CONTRADICTIONS) the LLM judge decided


#: the two kinds of pair check, as a rollup's ``pair_judge`` names them
REASKS, CONTRADICTIONS = "re-asks", "contradictions"


def pair_judge(by_llm: Sequence[str]) -> str:
    """Who decided a rollup's re-asks and contradictions: ``llm`` (both), ``lexical`` (neither), or per
    kind when the LLM judge decided one of them (``llm re-asks, lexical contradictions``)."""
    if not by_llm:
        return "lexical"
    if len(set(by_llm)) == 2:
        return "llm"
    other = CONTRADICTIONS if by_llm[0] == REASKS else REASKS
    return f"llm {by_llm[0]}, lexical {other}"


def rollup(
    app: str,
    model: str,
    conversation_id: str,
    turns: Sequence[ConversationTurn],
    reask_similarity: float,
    judged: PairVerdicts | None = None,
) -> ConversationRollup:
    """The conversation's outcome from its turns (deduplicated by the caller; any order). Re-asks and
    contradictions are lexical unless ``judged`` gives them (and its cost)."""
    if not turns:
        raise ConversationError(f"conversation {app}/{model}/{conversation_id} has no turns")
    ordered = in_order(turns)
    if judged is not None and not len(judged.reasked) == len(judged.contradicted) == len(ordered):
        raise ConversationError(f"conversation {app}/{model}/{conversation_id}: verdicts do not match turns")
    if judged is not None:
        reasked, contra = list(judged.reasked), list(judged.contradicted)
    else:
        reasked = reasks([t.question for t in ordered], reask_similarity)
        contra = contradictions([t.answer for t in ordered])
    with_verdict = [t for t in ordered if t.judged]
    last = with_verdict[-1] if with_verdict else None
    unresolved = last is not None and bool(last.answer_refusal or last.hallucination)
    hallucinated = [t for t in with_verdict if t.hallucination]
    refusals = [t for t in with_verdict if t.answer_refusal]
    worst = (
        hallucinated
        or ([last] if unresolved and last is not None else [])
        or refusals
        or [t for t, c in zip(ordered, contra, strict=True) if c]
        or [t for t, r in zip(ordered, reasked, strict=True) if r]
    )
    return ConversationRollup(
        app=app,
        model=model,
        conversation_id=conversation_id,
        first_turn_at=ordered[0].timestamp,
        last_turn_at=ordered[-1].timestamp,
        turns=len(ordered),
        judged_turns=len(with_verdict),
        hallucinated_turns=len(hallucinated),
        refusals=len(refusals),
        reasked_turns=sum(reasked),
        contradictions=sum(contra),
        ended=any(t.ends for t in ordered),
        ended_unresolved=unresolved,
        any_hallucinated=bool(hallucinated),
        reasked=any(reasked),
        contradicted=any(contra),
        input_tokens=sum(t.input_tokens for t in ordered),
        output_tokens=sum(t.output_tokens for t in ordered),
        cost_usd=sum(t.cost_usd for t in ordered),
        worst_turn_id=worst[0].interaction_id if worst else "",
        unresolving_turn_id=last.interaction_id if unresolved and last is not None else "",
        **_judge_columns(judged),
    )


def _judge_columns(judged: PairVerdicts | None) -> dict[str, Any]:
    """A rollup's columns on who decided its re-asks and contradictions and what that cost."""
    if judged is None:
        return {}
    return {
        "pair_judge": pair_judge(judged.by_llm), "judge_calls": judged.calls,
        "judge_input_tokens": judged.input_tokens, "judge_output_tokens": judged.output_tokens,
        "judge_cost_usd": judged.cost_usd, "judge_failure": judged.failure,
    }  # fmt: skip


def single(row: EvalRow) -> ConversationRollup:
    """An interaction without a conversation_id: a conversation of one turn."""
    turn = ConversationTurn(
        interaction_id=row.interaction_id,
        timestamp=row.timestamp,
        judged=row.judged,
        hallucination=row.hallucination,
        answer_refusal=row.answer_refusal,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=row.cost_usd,
    )
    one = rollup(row.app, row.model, "", [turn], 1.0)
    return one.model_copy(update={"interaction_id": row.interaction_id})


@dataclass
class _Open:
    last_turn: datetime  # the latest turn's event time seen
    ended: bool  # a turn marked the end
    touched: float  # monotonic time of the last turn's arrival
    generation: int = 0  # turns seen since it opened: a close forgets it only if none came meanwhile


class OpenConversations:
    """The conversations with turns not yet rolled up, and when each is due (module docstring)."""

    def __init__(self, idle: timedelta, max_skew: timedelta, quiet: timedelta | None = None) -> None:
        self.idle = idle
        self.max_skew = max_skew
        self.quiet = idle if quiet is None else quiet
        self._open: dict[ConversationKey, _Open] = {}
        self.watermarks: dict[tuple[str, str], datetime] = {}

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: object) -> bool:
        return key in self._open

    def touch(self, key: ConversationKey, at: datetime, ends: bool, wall: datetime, monotonic: float) -> None:
        """A turn of ``key`` at event time ``at`` arrived (``ends``: it marks the end)."""
        current = self._open.get(key)
        if current is None:
            self._open[key] = _Open(at, ends, monotonic)
        else:
            current.last_turn = max(current.last_turn, at)
            current.ended = current.ended or ends
            current.touched = monotonic
            current.generation += 1
        self.advance(key[0], key[1], at, wall)

    def advance(self, app: str, model: str, at: datetime, wall: datetime) -> None:
        """Event time of ``app`` and ``model`` reached ``at`` (any row of theirs, in a conversation or
        not), taken at most ``wall`` + ``max_skew``."""
        mark = min(at, wall + self.max_skew)
        series = (app, model)
        if series not in self.watermarks or mark > self.watermarks[series]:
            self.watermarks[series] = mark

    def reopen(self, key: ConversationKey, last_turn: datetime, ended: bool) -> None:
        """A conversation an earlier worker left open (its arrival time unknown: idle on the wall clock)."""
        if key not in self._open:
            self._open[key] = _Open(last_turn, ended, float("-inf"))

    def due(self, wall: datetime, monotonic: float) -> list[ConversationKey]:
        """The conversations to close now, oldest last turn first."""
        quiet_s = self.quiet.total_seconds()
        out = []
        for key, c in self._open.items():
            watermark = self.watermarks.get((key[0], key[1]))
            by_watermark = watermark is not None and watermark >= c.last_turn + self.idle
            quiet = monotonic - c.touched >= quiet_s and c.last_turn + self.idle <= wall
            if c.ended or by_watermark or quiet:
                out.append(key)
        return sorted(out, key=lambda k: (self._open[k].last_turn, k))

    def generation(self, key: ConversationKey) -> int | None:
        c = self._open.get(key)
        return c.generation if c is not None else None

    def closed(self, key: ConversationKey, generation: int | None) -> None:
        """Its rollup was written from the turns stored when ``generation`` was current: forget it unless
        a turn arrived since (that one is rolled up at its own close)."""
        c = self._open.get(key)
        if c is not None and c.generation == generation:
            del self._open[key]

    def keys(self) -> list[ConversationKey]:
        return list(self._open)

    def forget(self, keep: Callable[[ConversationKey], bool]) -> int:
        """Drop the open conversations ``keep`` refuses; returns how many."""
        gone = [key for key in self._open if not keep(key)]
        for key in gone:
            del self._open[key]
        return len(gone)


def turns_digest(turns: Iterable[ConversationTurn]) -> str:
    """Which stored turns (ids and evaluation versions) a rollup is computed from: the same digest, the
    same rollup."""
    listing = "\n".join(sorted(f"{t.interaction_id}\t{t.version}" for t in turns))
    return hashlib.sha256(listing.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def turn_of(e: Evaluation) -> ConversationTurn:
    """An evaluation as a turn of its conversation (texts and end mark from the interaction it carries)."""
    i = e.interaction
    return ConversationTurn(
        interaction_id=e.interaction_id,
        timestamp=e.timestamp,
        question=i.question if i is not None else "",
        answer=i.answer if i is not None else "",
        judged=e.judged,
        hallucination=e.hallucination,
        answer_refusal=e.answer_refusal,
        input_tokens=e.input_tokens,
        output_tokens=e.output_tokens,
        cost_usd=e.cost_usd,
        ends=i is not None and marks_end(i.metadata),
    )


def badness(c: ConversationRollup) -> tuple[int, int, int, int, int]:
    """Sorts worst first (descending): unresolved, hallucinated turns, contradictions, re-asks, refusals."""
    return (int(c.ended_unresolved), c.hallucinated_turns, c.contradictions, c.reasked_turns, c.refusals)


def conversations_of(evaluations: Iterable[Evaluation]) -> dict[ConversationKey, list[ConversationTurn]]:
    """The turns of each conversation of these evaluations (those with a conversation_id), in
    conversation order; an interaction id seen twice counts once (the last)."""
    grouped: dict[ConversationKey, dict[str, ConversationTurn]] = defaultdict(dict)
    for e in evaluations:
        if e.conversation_id is not None:
            grouped[(e.app, e.model, e.conversation_id)][e.interaction_id] = turn_of(e)
    return {key: in_order(list(turns.values())) for key, turns in grouped.items()}


def rollups_of(
    evaluations: Iterable[Evaluation],
    reask_similarity: float,
    judged: Mapping[ConversationKey, PairVerdicts] | None = None,
) -> list[ConversationRollup]:
    """Every conversation of these evaluations (one per app, model and conversation_id; an evaluation
    without one is a conversation of one turn); an interaction id seen twice counts once (the last).
    ``judged``: re-asks and contradictions the LLM judge decided, by conversation (else lexical)."""
    evaluations = list(evaluations)
    out = [single(EvalRow.from_evaluation(e)) for e in evaluations if e.conversation_id is None]
    for (app, model, cid), turns in conversations_of(evaluations).items():
        verdicts = (judged or {}).get((app, model, cid))
        out.append(rollup(app, model, cid, turns, reask_similarity, verdicts))
    return out


def counts_in(metric: Metric, conversation: ConversationRollup) -> bool:
    """Whether a conversation counts in a conversation metric: a rate read from the judge's verdicts
    (its count column ``JUDGED_CONVERSATIONS``) counts only the conversations with a judged turn; the
    others count every conversation."""
    return metric.count_column != JUDGED_CONVERSATIONS or conversation.judged_turns > 0


def figures(
    evaluations: Iterable[Evaluation],
    reask_similarity: float,
    judged: Mapping[ConversationKey, PairVerdicts] | None = None,
) -> ConversationFigures:
    """The catalogue's conversation metrics over the conversations of these evaluations, as a window
    computes them (``streams.windows.aggregator``), the worst conversations, and what the LLM judge's
    re-ask and contradiction checks cost (``judged``: by conversation)."""
    return figures_of(rollups_of(evaluations, reask_similarity, judged), judged)


def figures_of(
    rollups: Sequence[ConversationRollup], judged: Mapping[ConversationKey, PairVerdicts] | None = None
) -> ConversationFigures:
    """``figures`` of conversations already rolled up (``rollups_of``)."""
    values: dict[str, float | None] = {}
    for metric in CONVERSATION_SCORED:
        known = [float(getattr(c, str(metric.source))) for c in rollups if counts_in(metric, c)]
        values[metric.name] = sum(known) / len(known) if known else None
    multi = [c for c in rollups if c.conversation_id]
    worst = sorted((c for c in multi if any(badness(c))), key=badness, reverse=True)[:20]
    spent = list((judged or {}).values())
    return ConversationFigures(
        conversations=len(rollups), multi_turn=len(multi), metrics=values, worst=worst,
        judge_calls=sum(j.calls for j in spent), judge_input_tokens=sum(j.input_tokens for j in spent),
        judge_output_tokens=sum(j.output_tokens for j in spent),
        judge_cost_usd=sum(j.cost_usd for j in spent),
    )  # fmt: skip
