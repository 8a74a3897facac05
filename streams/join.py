"""The join's state and timeout: parts in, complete or expired entries out (no Kafka here). The
processor that feeds it is ``streams.processors.join.JoinProcessor``.

converted + judged -> evaluations: one Evaluation per message once its two parts are in (the Converted,
and the judge processor's ``JudgeResult`` with the NLI and refusal results).

Design (at-least-once without transactions or table recovery):

* The join state is an in-memory buffer, not a faust table: on Tansu, table recovery can lose the last
  changelog batch (``end_offsets`` is off by one batch) and there are no transactions to tie a changelog
  write to an offset commit.
* Instead the source events themselves are the durable state. Every part (the Converted, the JudgeResult)
  is consumed with ``noack`` and acked only once its message's outcome is out: its
  Evaluation sent (delivery awaited), or its dead letter sent or given up. Acks go through
  ``streams.acks.OrderedAcks``, in offset order per partition, because faust's own gap handling can
  commit past a held message. So the committed offset of each input partition never passes a part whose
  outcome is not out; after a crash the parts are redelivered and the buffer rebuilt.
* One entry is one message: the buffer is keyed by (interaction_id, digest), the digest being the sha256
  of the interaction's canonical JSON, computed once where it enters judging and carried in every part
  (``schemas.interaction.interaction_digest``). Two messages with the same interaction_id sent back to
  back never mix: each Evaluation holds its own interaction with its own statements and scores.
* All inputs are keyed by interaction_id with the same partition count (co-partitioned), so one worker
  sees every part of an interaction. On a rebalance the buffer forgets the partitions it lost.
* After the join timeout an entry is first checked against ClickHouse: when a complete Evaluation of the
  interaction is already there, the entry was a part redelivered after its Evaluation went out (the
  commit of its partition lagged behind the other inputs' at a crash), or an incomplete message whose
  row could not replace a complete one anyway (the table's version prefers complete rows), and is
  dropped. When that check fails (ClickHouse unreachable) the entry is emitted all the same: a duplicate
  is harmless. Otherwise an entry with its Converted is emitted incomplete (``missing`` names the absent
  stages); one without its Converted cannot be assembled and goes to deadletter (stage "join").
* A stage the judge processor could not finish (its judge gave up; dead-lettered under the stage's name)
  is None in its JudgeResult: the entry is complete (every part is in) and is emitted at once, its
  ``missing`` naming the stage.
* No part is left unacked: an Evaluation that cannot be sent is retried (``pipeline.retry``,
  ``kafka.deadletter_attempts`` times) and then dead-lettered (stage "join"), and a dead letter that
  cannot be sent either is given up (``StreamContext.dead_letter``); the parts are acked in every case,
  so the partition moves on.
* Late parts: the parts of an entry that left the buffer incomplete (emitted incomplete, or
  dead-lettered without its Converted) are kept in a bounded LRU (``kafka.join_emitted_cache``
  interactions). A part that arrives later merges with them and the Evaluation is rebuilt and sent again
  (complete once every part is in). Duplicates downstream are harmless: the ``evaluations`` table is a
  ReplacingMergeTree on interaction_id whose version prefers complete rows.
* The timeout (``kafka.join_timeout_s``) defaults to the judge's worst case for one call plus 30 s, at
  least 120 s (``join_timeout``); a shorter configured one is used but warned about at start (its late
  parts are still joined through the LRU while they are in it).
* Emitting (relevance, assembly, the send and its delivery) runs in tasks, at most
  ``kafka.stage_concurrency`` at once, so the join keeps consuming while the broker confirms.

Cost: a part held for long (a slow or failed stage) holds back the committed offset of its partition, so
more is redelivered after a crash; the join timeout bounds it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.results import Converted, JudgeResult, NliResult, RefusalResult
from schemas.settings import JudgeSettings, Settings
from streams.acks import Ticket

log = logging.getLogger(__name__)

Part = Converted | JudgeResult
#: one message's entry: (interaction_id, digest of its interaction)
Key = tuple[str, str]


def key_of(part: Part) -> Key:
    iid = part.interaction.interaction_id if isinstance(part, Converted) else part.interaction_id
    return iid, part.digest


@dataclass
class Pending:
    interaction_id: str
    digest: str
    first_seen: float
    converted: Converted | None = None
    judged: JudgeResult | None = None
    tickets: list[Ticket] = field(default_factory=list)
    tps: set[Any] = field(default_factory=set)

    @property
    def key(self) -> Key:
        return self.interaction_id, self.digest

    def take(self, ticket: Ticket | None) -> None:
        if ticket is not None:
            self.tickets.append(ticket)
            self.tps.add(ticket.tp)

    def parts_only(self, first_seen: float) -> Pending:
        """A copy with the parts and no tickets."""
        return Pending(
            interaction_id=self.interaction_id,
            digest=self.digest,
            first_seen=first_seen,
            converted=self.converted,
            judged=self.judged,
        )

    @property
    def complete(self) -> bool:
        """Both parts are in (a stage that failed is None in the JudgeResult: nothing more will come)."""
        return self.converted is not None and self.judged is not None

    def missing(self, need_refusal: bool) -> list[str]:
        """What the Evaluation lacks: the Converted, and the stages without a result."""
        out = []
        if self.converted is None:
            out.append("converted")
        if self.nli is None:
            out.append("nli")
        if need_refusal and self.refusal is None:
            out.append("refusal")
        return out

    @property
    def nli(self) -> NliResult | None:
        return self.judged.nli if self.judged is not None else None

    @property
    def refusal(self) -> RefusalResult | None:
        return self.judged.refusal if self.judged is not None else None

    def put(self, part: Part) -> None:
        if isinstance(part, Converted):
            self.converted = part
        else:
            self.judged = part


def judge_worst_case_s(judge: JudgeSettings) -> float:
    """The longest one judge call can take before it fails: every attempt timing out plus the backoffs
    for an HTTP judge; ``local_timeout_s`` for the local server; 0 for the lexical judge."""
    if judge.kind == "lexical":
        return 0.0
    if judge.kind == "local" or (judge.kind == "cascade" and judge.cascade_llm == "local"):
        return judge.local_timeout_s
    backoff = sum(min(judge.backoff_base_s * 2**i, judge.backoff_max_s) for i in range(judge.max_retries))
    return (judge.max_retries + 1) * judge.timeout_s + backoff


def join_timeout(settings: Settings) -> float:
    """``kafka.join_timeout_s``, or when unset the judge's worst case for one call + 30 s (at least 120 s).
    A configured value under the worst case is kept (a test or an impatient deployment may want it) but
    warned about: parts later than it arrive after their interaction went out incomplete."""
    worst = judge_worst_case_s(settings.judge)
    configured = settings.kafka.join_timeout_s
    if configured is None:
        return max(120.0, worst + 30.0)
    if configured < worst:
        log.warning(
            "kafka.join_timeout_s=%ss is under the %s judge's worst case for one call (%.0fs): slow parts "
            "will be emitted incomplete first (a late part re-emits the complete Evaluation while its "
            "interaction is among the last kafka.join_emitted_cache). Unset it to derive it.",
            configured,
            settings.judge.kind,
            worst,
        )
    return configured


class JoinBuffer:
    """Pure join state: parts in, complete or expired entries out (no Kafka here). An entry is one
    message: its parts share the interaction_id and the digest of the interaction (``key_of``).

    Entries that leave incomplete (``expired``) keep their parts in an LRU of ``keep_late`` messages;
    a later part of one of them (``add``) returns the merged entry at once, to be re-emitted."""

    def __init__(self, *, timeout_s: float, keep_late: int = 10_000) -> None:
        self.timeout_s = timeout_s
        self.keep_late = keep_late
        self._entries: dict[Key, Pending] = {}
        self._left: OrderedDict[Key, Pending] = OrderedDict()  # left incomplete: parts only, no tickets

    def __len__(self) -> int:
        return len(self._entries)

    def late(self) -> int:
        """Messages that left incomplete and whose parts are kept for late arrivals."""
        return len(self._left)

    def add(self, part: Part, ticket: Ticket | None, now: float) -> Pending | None:
        """Add one part; return (and remove) the entry when it is complete, or, for a message that
        already left incomplete, the entry merged with the parts it left with (to emit again)."""
        key = key_of(part)
        left = None if key in self._entries else self._left.pop(key, None)
        if left is not None:
            merged = left.parts_only(first_seen=now)
            merged.put(part)
            if not merged.complete:  # still incomplete: keep its parts for the next one
                self._remember(merged)
            merged.take(ticket)
            return merged
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = Pending(interaction_id=key[0], digest=key[1], first_seen=now)
        entry.put(part)
        entry.take(ticket)
        if entry.complete:
            return self._entries.pop(key)
        return None

    def _remember(self, entry: Pending) -> None:
        if self.keep_late <= 0:
            return
        self._left[entry.key] = entry.parts_only(first_seen=entry.first_seen)
        self._left.move_to_end(entry.key)
        while len(self._left) > self.keep_late:
            self._left.popitem(last=False)

    def expired(self, now: float) -> list[Pending]:
        """Remove and return the entries older than the timeout; their parts are kept for late parts.
        The caller owns their tickets from then on: it must ack them once their outcome is out."""
        out = [e for e in self._entries.values() if now - e.first_seen >= self.timeout_s]
        for e in out:
            del self._entries[e.key]
            self._remember(e)
        return out

    def discard_late(self, key: Key) -> None:
        """Forget the kept parts of a message (it is complete elsewhere)."""
        self._left.pop(key, None)

    def forget(self, tps: Iterable[Any]) -> int:
        lost = set(tps)
        gone = [key for key, e in self._entries.items() if e.tps & lost]
        for key in gone:
            del self._entries[key]
        return len(gone)
