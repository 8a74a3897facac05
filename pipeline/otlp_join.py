"""The pieces of OpenTelemetry model calls held until they can be read: a call's span and its log
records (GenAI events) may arrive apart, in several export requests and on two topics, and the
retrieved passages of a trace in another request than its model call. Pure state, no Kafka: export
requests in (``add``), calls ready to convert out (``pipeline.otlp.convert_call``).

When a call is ready:

- its span holds its messages: at once;
- its records hold both sides (a ``gen_ai.client.inference.operation.details`` event, or 1.30 message
  events and a ``gen_ai.choice``): when its span is in too, or at once when traces are not read;
- its span has no content and logs are not read: at once (it is reported without content);
- otherwise after ``hold_s`` (a setting: ``kafka.otlp_hold_s``) from its first piece, with what came: a
  call read from its records alone, or one whose content never came, reported with the reason.

A ready call takes the passages of its trace held at that time (passages are held ``hold_s`` too). The
keys of recently ready calls are remembered (``keep_done``), so a piece arriving after its call went out
(the events of a span that held its messages) is dropped instead of making a second interaction.

Each piece comes with an opaque ticket (the worker's ack of the export request it came in): a ticket is
handed back once every call it fed is out (``settled``) and every passage entry it fed let go
(``released``), so the request is acked only then and comes back after a crash.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from pipeline.otlp import Batch, Call, Passage

Key = tuple[str, str]


@dataclass
class _Entry:
    first_seen: float
    tickets: list[Hashable] = field(default_factory=list)


@dataclass
class _CallEntry(_Entry):
    call: Call = field(default_factory=lambda: Call("", ""))


@dataclass
class _PassageEntry(_Entry):
    passages: list[Passage] = field(default_factory=list)


@dataclass(frozen=True)
class Ready:
    call: Call
    passages: list[Passage]
    held_s: float  # how long its first piece waited
    expired: bool  # it waited out the hold time
    tickets: tuple[Hashable, ...] = ()  # the requests it came in: hand it to ``settled`` once it is out


class OtlpBuffer:
    def __init__(
        self, *, hold_s: float, traces: bool, logs: bool, keep_done: int = 10_000, at_once: bool = True
    ) -> None:
        """``traces``/``logs``: which of the two are read (a call does not wait for what never comes);
        ``at_once=False`` holds everything until ``drain`` (a set of files read whole)."""
        self.hold_s = hold_s
        self.traces = traces
        self.logs = logs
        self.keep_done = keep_done
        self.at_once = at_once
        self._calls: dict[Key, _CallEntry] = {}
        self._passages: dict[str, _PassageEntry] = {}
        self._done: OrderedDict[Key, None] = OrderedDict()
        self._holds: dict[Hashable, int] = {}  # ticket -> entries it still feeds
        self._released: list[Hashable] = []
        self.dropped_late = 0  # pieces of calls already out

    def __len__(self) -> int:
        return len(self._calls)

    def _hold(self, entry: _Entry, ticket: Hashable | None) -> None:
        if ticket is not None and ticket not in entry.tickets:
            entry.tickets.append(ticket)
            self._holds[ticket] = self._holds.get(ticket, 0) + 1

    def _let_go(self, entry: _Entry) -> None:
        for ticket in entry.tickets:
            if ticket not in self._holds:  # forgotten with its partition (``forget``): nothing to ack
                continue
            self._holds[ticket] -= 1
            if self._holds[ticket] == 0:
                del self._holds[ticket]
                self._released.append(ticket)

    def released(self) -> list[Hashable]:
        """The tickets whose every entry is out since the last call (each handed back once)."""
        out, self._released = self._released, []
        return out

    def add(self, batch: Batch, ticket: Hashable | None, now: float) -> list[Ready]:
        """Take one export request's pieces; return the calls that are ready now."""
        if ticket is not None:
            self._holds[ticket] = self._holds.get(ticket, 0) + 1  # (until the end of this add)
        for trace, passages in batch.passages.items():
            entry = self._passages.setdefault(trace, _PassageEntry(first_seen=now))
            entry.passages.extend(p for p in passages if p not in entry.passages)
            self._hold(entry, ticket)
        touched: list[Key] = []
        for span in batch.spans:
            key = (span.trace_id, span.span_id)
            if self._late(key):
                continue
            self._entry(key, now, ticket).call.span = span
            touched.append(key)
        for record in batch.records:
            key = (record.trace_id, record.span_id)
            if self._late(key):
                continue
            self._entry(key, now, ticket).call.records.append(record)
            touched.append(key)
        ready = [self._out(key, now, False) for key in dict.fromkeys(touched) if self._ready(key)]
        if ticket is not None:
            self._let_go(_Entry(now, [ticket]))
        return ready

    def _late(self, key: Key) -> bool:
        if key in self._done:
            self.dropped_late += 1
            return True
        return False

    def _entry(self, key: Key, now: float, ticket: Hashable | None) -> _CallEntry:
        entry = self._calls.get(key)
        if entry is None:
            entry = self._calls[key] = _CallEntry(first_seen=now, call=Call(*key))
        self._hold(entry, ticket)
        return entry

    def _ready(self, key: Key) -> bool:
        if not self.at_once:
            return False
        call = self._calls[key].call
        if call.span_has_content():
            return True
        if call.records_complete():  # (a record without ids has no span to wait for)
            return call.span is not None or not self.traces or not call.trace_id
        return call.span is not None and not self.logs

    def _out(self, key: Key, now: float, expired: bool) -> Ready:
        entry = self._calls.pop(key)
        self._done[key] = None
        self._done.move_to_end(key)
        while len(self._done) > self.keep_done:
            self._done.popitem(last=False)
        held = self._passages.get(key[0])
        passages = list(held.passages) if held else []
        return Ready(entry.call, passages, now - entry.first_seen, expired, tuple(entry.tickets))

    def settled(self, ready: Ready) -> list[Hashable]:
        """A ready call's outcome is out: the tickets that feed nothing held any more (to ack)."""
        self._let_go(_Entry(0.0, list(ready.tickets)))
        return self.released()

    def expired(self, now: float) -> list[Ready]:
        """The calls held ``hold_s`` or longer (ready with what came); passages that old are let go."""
        due = [key for key, e in self._calls.items() if now - e.first_seen >= self.hold_s]
        out = [self._out(key, now, True) for key in due]
        for trace in [t for t, e in self._passages.items() if now - e.first_seen >= self.hold_s]:
            self._let_go(self._passages.pop(trace))
        return out

    def drain(self, now: float = 0.0) -> list[Ready]:
        """Every held call, ready with what came (the end of a set of files)."""
        out = [self._out(key, now, False) for key in list(self._calls)]
        for trace in list(self._passages):
            self._let_go(self._passages.pop(trace))
        return out

    def forget(self, lost: Any, where: Any) -> int:
        """Forget the entries fed by a request read from a partition in ``lost`` (``where(ticket)`` names a
        ticket's partition; a rebalance): those requests come back to whichever worker reads them now.
        The other tickets of a forgotten entry are let go as if it were out."""
        gone = set(lost)
        entries: list[_Entry] = []
        calls = [k for k, e in self._calls.items() if any(where(t) in gone for t in e.tickets)]
        entries += [self._calls.pop(k) for k in calls]
        traces = [t for t, e in self._passages.items() if any(where(x) in gone for x in e.tickets)]
        entries += [self._passages.pop(t) for t in traces]
        for entry in entries:
            for ticket in entry.tickets:
                if where(ticket) in gone:
                    self._holds.pop(ticket, None)
            entry.tickets = [t for t in entry.tickets if where(t) not in gone]
            self._let_go(entry)
        return len(calls)
