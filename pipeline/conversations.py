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

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

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
    similarity of their content words reaches ``similarity``."""
    seen: list[frozenset[str]] = []
    out = []
    for question in questions:
        words = content_words(question)
        out.append(bool(words) and any(jaccard(words, earlier) >= similarity for earlier in seen))
        seen.append(words)
    return out


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
    for a in answer:
        for b in earlier:
            changed = bool(a.values - b.values) and bool(b.values - a.values)
            if changed and jaccard(a.subject, b.subject) >= SAME_SUBJECT:
                return True
    return False


def contradictions(answers: Sequence[str]) -> list[bool]:
    """For each answer (in order), whether it contradicts an earlier answer of the conversation."""
    seen: list[Claim] = []
    out = []
    for answer in answers:
        mine = claims(answer)
        out.append(contradicts(mine, seen))
        seen.extend(mine)
    return out


def _order(turn: ConversationTurn) -> tuple[datetime, str]:
    return turn.timestamp, turn.interaction_id


def rollup(
    app: str, model: str, conversation_id: str, turns: Sequence[ConversationTurn], reask_similarity: float
) -> ConversationRollup:
    """The conversation's outcome from its turns (deduplicated by the caller; any order)."""
    if not turns:
        raise ConversationError(f"conversation {app}/{model}/{conversation_id} has no turns")
    ordered = sorted(turns, key=_order)
    reasked = reasks([t.question for t in ordered], reask_similarity)
    contra = contradictions([t.answer for t in ordered])
    judged = [t for t in ordered if t.judged]
    last = judged[-1] if judged else None
    unresolved = last is not None and bool(last.answer_refusal or last.hallucination)
    hallucinated = [t for t in judged if t.hallucination]
    refusals = [t for t in judged if t.answer_refusal]
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
        judged_turns=len(judged),
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
    )


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
    return rollup(row.app, row.model, "", [turn], 1.0)


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


def rollups_of(evaluations: Iterable[Evaluation], reask_similarity: float) -> list[ConversationRollup]:
    """Every conversation of these evaluations (one per app, model and conversation_id; an evaluation
    without one is a conversation of one turn); an interaction id seen twice counts once (the last)."""
    grouped: dict[ConversationKey, dict[str, ConversationTurn]] = defaultdict(dict)
    out = []
    for e in evaluations:
        if e.conversation_id is None:
            out.append(single(EvalRow.from_evaluation(e)))
        else:
            grouped[(e.app, e.model, e.conversation_id)][e.interaction_id] = turn_of(e)
    for (app, model, cid), turns in grouped.items():
        out.append(rollup(app, model, cid, list(turns.values()), reask_similarity))
    return out


def counts_in(metric: Metric, conversation: ConversationRollup) -> bool:
    """Whether a conversation counts in a conversation metric: a rate read from the judge's verdicts
    (its count column ``JUDGED_CONVERSATIONS``) counts only the conversations with a judged turn; the
    others count every conversation."""
    return metric.count_column != JUDGED_CONVERSATIONS or conversation.judged_turns > 0


def figures(evaluations: Iterable[Evaluation], reask_similarity: float) -> ConversationFigures:
    """The catalogue's conversation metrics over the conversations of these evaluations, as a window
    computes them (``streams.windows.aggregator``), and the worst conversations."""
    rollups = rollups_of(evaluations, reask_similarity)
    values: dict[str, float | None] = {}
    for metric in CONVERSATION_SCORED:
        known = [float(getattr(c, str(metric.source))) for c in rollups if counts_in(metric, c)]
        values[metric.name] = sum(known) / len(known) if known else None
    multi = [c for c in rollups if c.conversation_id]
    worst = sorted((c for c in multi if any(badness(c))), key=badness, reverse=True)[:20]
    return ConversationFigures(conversations=len(rollups), multi_turn=len(multi), metrics=values, worst=worst)
