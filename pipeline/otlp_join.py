"""The pieces of OpenTelemetry traces held until they can be read: a trace's model-call spans, their
log records (GenAI events), its tool spans, its other spans (agents, chains: where the conversation id
and the agent's output sit) and its retrieved passages may arrive apart, in several export requests and on
two topics. Pure state, no Kafka: export requests in (``add``), traces ready to convert out
(``pipeline.otlp.convert_trace``, one interaction per final answer).

A trace is held whole, because its answer is judged with every step before it. It is ready:

- when traces are read: once a span without a parent (its root: an SDK exports the root span last,
  when the request is done) has come and each of its model calls is complete (its span holds its
  messages; or its records hold both sides, a ``gen_ai.client.inference.operation.details`` event or
  1.30 message events and a ``gen_ai.choice``; or, logs not being read, its span came);
- when only logs are read: once each of its calls' records are complete;
- otherwise after ``hold_s`` (a setting: ``kafka.otlp_hold_s``) from its first piece, with what came (it
  is judged so and says it: a tool call whose result never came is a step without a result).

The model calls of recently ready traces are remembered (``keep_done``), so a piece of one arriving after
its trace went out (the events of a span that held its messages) is dropped instead of making a second
interaction; another span of a trace already out starts it again, held until a root or ``hold_s`` (a
late tool span alone is let go then).

Each piece comes with an opaque ticket (the worker's ack of the export request it came in): a ticket is
handed back once every trace it fed is out (``settled``) or let go, so the request is acked only then
and comes back after a crash.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from pipeline.otlp import Batch, Call, Trace

Key = tuple[str, str]


@dataclass
class _Entry:
    first_seen: float
    tickets: list[Hashable] = field(default_factory=list)


@dataclass
class _TraceEntry(_Entry):
    trace: Trace = field(default_factory=lambda: Trace(""))


@dataclass(frozen=True)
class Ready:
    trace: Trace
    held_s: float  # how long its first piece waited
    expired: bool  # it waited out the hold time
    tickets: tuple[Hashable, ...] = ()  # the requests it came in: hand it to ``settled`` once it is out


class OtlpBuffer:
    def __init__(
        self, *, hold_s: float, traces: bool, logs: bool, keep_done: int = 10_000, at_once: bool = True
    ) -> None:
        """``traces``/``logs``: which of the two are read (a trace does not wait for what never comes);
        ``at_once=False`` holds everything until ``drain`` (a set of files read whole)."""
        self.hold_s = hold_s
        self.traces = traces
        self.logs = logs
        self.keep_done = keep_done
        self.at_once = at_once
        self._traces: dict[str, _TraceEntry] = {}
        self._done: OrderedDict[Key, None] = OrderedDict()
        self._holds: dict[Hashable, int] = {}  # ticket -> entries it still feeds
        self._released: list[Hashable] = []
        self.dropped_late = 0  # pieces of traces already out

    def __len__(self) -> int:
        """The traces held that hold a model call."""
        return sum(1 for e in self._traces.values() if e.trace.calls)

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
        """Take one export request's pieces; return the traces that are ready now."""
        if ticket is not None:
            self._holds[ticket] = self._holds.get(ticket, 0) + 1  # (until the end of this add)
        touched: list[str] = []

        def entry(trace_id: str, span_id: str, real: str | None = None) -> Trace | None:
            if (trace_id, span_id) in self._done:
                self.dropped_late += 1
                return None
            found = self._traces.get(trace_id)
            if found is None:
                trace = Trace(trace_id if real is None else real)
                found = self._traces[trace_id] = _TraceEntry(first_seen=now, trace=trace)
            self._hold(found, ticket)
            touched.append(trace_id)
            return found.trace

        for trace_id, passages in batch.passages.items():
            if (held := entry(trace_id, "")) is not None:
                held.passages.extend(p for p in passages if p not in held.passages)
        for trace_id, tools in batch.tools.items():
            for tool in tools:
                if (held := entry(trace_id, tool.span_id)) is not None:
                    held.tools[tool.span_id] = tool
                    held.root = held.root or not tool.parent_id
        for trace_id, others in batch.others.items():
            for info in others:
                if (held := entry(trace_id, info.span_id)) is not None:
                    held.others[info.span_id] = info
                    held.root = held.root or not info.parent_id
        for span in batch.spans:
            if (held := entry(span.trace_id, span.span_id)) is not None:
                held.calls.setdefault(span.span_id, Call(span.trace_id, span.span_id)).span = span
                held.root = held.root or not span.parent_id
        for record in batch.records:
            # a record without ids (a details event outside any span) is a trace of its own
            trace_id = record.trace_id or record.span_id
            if (held := entry(trace_id, record.span_id, record.trace_id)) is not None:
                call = held.calls.setdefault(record.span_id, Call(record.trace_id, record.span_id))
                call.records.append(record)
        ready = [self._out(t, now, False) for t in dict.fromkeys(touched) if self._ready(t)]
        if ticket is not None:
            self._let_go(_Entry(now, [ticket]))
        return ready

    def _ready(self, trace_id: str) -> bool:
        if not self.at_once or trace_id not in self._traces:
            return False
        trace = self._traces[trace_id].trace
        if self.traces and trace.trace_id == trace_id and not trace.root:  # (id-less records: no root)
            return False
        if not trace.calls:  # a trace with no model call is let go once complete (its root came)
            return True
        return all(self._call_ready(call) for call in trace.calls.values())

    def _call_ready(self, call: Call) -> bool:
        if call.span_has_content():
            return True
        if call.records_complete():  # (a record without ids has no span to wait for)
            return call.span is not None or not self.traces or not call.trace_id
        return call.span is not None and not self.logs

    def _out(self, trace_id: str, now: float, expired: bool) -> Ready:
        entry = self._traces.pop(trace_id)
        trace = entry.trace
        keys = list(trace.calls)  # (a late tool or other span starts an entry of its own, let go in time)
        for span_id in keys:
            self._done[(trace_id, span_id)] = None
            self._done.move_to_end((trace_id, span_id))
        while len(self._done) > self.keep_done:
            self._done.popitem(last=False)
        if not trace.calls:  # nothing to convert: its requests need not wait for an outcome
            self._let_go(entry)
            return Ready(trace, now - entry.first_seen, expired, ())
        return Ready(trace, now - entry.first_seen, expired, tuple(entry.tickets))

    def settled(self, ready: Ready) -> list[Hashable]:
        """A ready trace's outcome is out: the tickets that feed nothing held any more (to ack)."""
        self._let_go(_Entry(0.0, list(ready.tickets)))
        return self.released()

    def expired(self, now: float) -> list[Ready]:
        """The traces held ``hold_s`` or longer that hold a model call (ready with what came); the others
        that old are let go."""
        due = [t for t, e in self._traces.items() if now - e.first_seen >= self.hold_s]
        out = [self._out(t, now, True) for t in due]
        return [r for r in out if r.trace.calls]

    def drain(self, now: float = 0.0) -> list[Ready]:
        """Every held trace that holds a model call, ready with what came (the end of a set of files)."""
        out = [self._out(t, now, False) for t in list(self._traces)]
        return [r for r in out if r.trace.calls]

    def forget(self, lost: Any, where: Any) -> int:
        """Forget the traces fed by a request read from a partition in ``lost`` (``where(ticket)`` names a
        ticket's partition; a rebalance): those requests come back to whichever worker reads them now.
        The other tickets of a forgotten trace are let go as if it were out. Returns how many traces
        holding a model call were forgotten."""
        gone = set(lost)
        traces = [t for t, e in self._traces.items() if any(where(x) in gone for x in e.tickets)]
        entries = [self._traces.pop(t) for t in traces]
        for entry in entries:
            for ticket in entry.tickets:
                if where(ticket) in gone:
                    self._holds.pop(ticket, None)
            entry.tickets = [t for t in entry.tickets if where(t) not in gone]
            self._let_go(entry)
        return sum(1 for e in entries if e.trace.calls)
