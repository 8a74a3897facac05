"""otlp, otlp_logs -> interactions: OpenTelemetry traces and logs turned into interactions
(``pipeline.otlp``), when ``kafka.otlp_input`` or ``kafka.otlp_logs_input`` is on.

Export requests are consumed unacked; their pieces (model-call spans, GenAI log records, tool spans,
the other spans of a trace, retrieved passages) are held in a ``pipeline.otlp_join.OtlpBuffer`` until
each trace is ready (once its root span came and its calls are complete, else after
``kafka.otlp_hold_s``), and a request is acked (in offset order) once every trace it fed is out: the
interaction of its final answer sent, and a dead letter (stage ``otlp``, with the reason) sent or given up
for each model call that cannot be mapped.
A request that does not validate is dead-lettered at once (stage ``validate``; one that is not shaped as
OTLP/JSON below the top, stage ``otlp``). Time is read from an injected ``pipeline.clock.Clock``.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
from collections.abc import Iterable
from typing import Any

from pydantic_core import PydanticSerializationError

from pipeline.clock import Clock
from pipeline.otlp import Call, convert_trace, read_batch
from pipeline.otlp_join import OtlpBuffer, Ready
from pipeline.retry import Backoff, retry
from schemas.errors import InvalidMessage
from schemas.interaction import Interaction
from schemas.otlp import OtlpLogs, OtlpTraces
from streams.acks import OrderedAcks, Ticket
from streams.codec import Origin, decode
from streams.context import StreamContext
from streams.processors.holding import HoldingProcessor
from streams.resources import Resources
from streams.task_pool import TaskPool

log = logging.getLogger(__name__)

#: a held request: (partition, offset, delivery serial). A request redelivered after a rebalance is another
#: key, so an outcome of its first delivery still in flight never acks the second one
Held = tuple[Any, int, int]


class OtlpProcessor(HoldingProcessor):
    name = "groundwatch.otlp"
    stage = "otlp"

    def __init__(self, ctx: StreamContext, resources: Resources, clock: Clock | None = None) -> None:
        self.ctx = ctx
        self.resources = resources
        self.clock: Clock = clock or resources.clock
        kafka = ctx.settings.kafka
        self.buffer = OtlpBuffer(
            hold_s=kafka.otlp_hold_s, traces=kafka.otlp_input, logs=kafka.otlp_logs_input
        )
        self.acks = OrderedAcks()
        self.tickets: dict[Held, Ticket] = {}
        self._deliveries = itertools.count()
        self.pool = TaskPool(kafka.stage_concurrency)

    @property
    def inputs(self) -> list[str]:
        kafka, names = self.ctx.settings.kafka, self.ctx.names
        return [
            *([names.otlp] if kafka.otlp_input else []),
            *([names.otlp_logs] if kafka.otlp_logs_input else []),
        ]

    @property
    def hold_s(self) -> float:
        return self.buffer.hold_s

    def ack(self, held: list[Any]) -> None:
        for key in held:
            ticket = self.tickets.pop(key, None)
            if ticket is not None:
                self.acks.done(ticket)

    async def outcome(self, ready: Ready) -> None:
        """Send the trace's interaction (retried, then dead-lettered), and dead-letter each model call that
        cannot be mapped with the reason; never raises (but for cancellation)."""
        trace = ready.trace
        result = convert_trace(trace, incomplete=ready.expired, limits=self.ctx.settings.limits)
        if result.steps:  # a trace of calls that only asked for tools: counted, not judged (no answer)
            self.ctx.metrics.otlp_steps.labels("yes" if result.interactions else "no").inc(result.steps)
        for error in result.errors:
            call = trace.calls.get(error.span_id) or Call(error.trace_id, error.span_id)
            why = error.reason
            if ready.expired and not call.span_has_content() and call.records and not call.records_complete():
                why = f"{why} (its log records were incomplete after {ready.held_s:.0f}s)"
            await self.dead_letter(
                call, InvalidMessage(f"model call {error.name!r} not mapped: {why}"), self._topic(call)
            )
        for found in result.interactions:
            iid = found.interaction_id
            call = trace.calls[iid.rpartition(":")[2]]
            send = functools.partial(self._send, iid, found)
            tried = await retry(
                send,
                what=f"otlp: sending {iid}",
                attempts=self.ctx.settings.kafka.deadletter_attempts,
                backoff=Backoff(first_s=self.ctx.retry_delay_s),
                sleep=self.ctx.clock.sleep,
            )
            failed = tried.error or tried.value
            if failed is not None:
                await self.dead_letter(call, failed, self._topic(call), self._original(found))
                continue
            self.ctx.metrics.events_out.labels("otlp").inc()

    async def _send(self, iid: str, found: Interaction) -> PydanticSerializationError | None:
        """Send one interaction; an interaction that cannot be written out is returned, not raised (no
        retry can write it out)."""
        try:
            await self.ctx.send(self.ctx.names.interactions, iid, found)
        except PydanticSerializationError as exc:
            return exc
        return None

    def _original(self, found: Interaction) -> str | None:
        """The interaction a dead letter carries to replay: masked in ``privacy.mode`` all (as the
        stages after this one would store it); None when it cannot be masked or written out."""
        try:
            return self.resources.privacy.for_storage(found).model_dump_json()
        except Exception as exc:  # the failure being dead-lettered stays the one reported
            log.warning("otlp: a dead letter carries no interaction (%s)", type(exc).__name__)
            return None

    def _topic(self, call: Call) -> str:
        return self.ctx.names.otlp if call.span is not None else self.ctx.names.otlp_logs

    async def dead_letter(
        self, call: Any, error: BaseException, topic: str, original: str | None = None
    ) -> None:
        """A call's dead letter. Its payload names the call only (trace id, span id, name), so its id is
        the same for every delivery whatever pieces had arrived; what came is said in the error."""
        came = ", ".join(["span"] * (call.span is not None) + [r.event for r in call.records]) or "nothing"
        await self.ctx.dead_letter(
            InvalidMessage(f"{error} [received: {came}]") if isinstance(error, InvalidMessage) else error,
            "otlp",
            json.dumps({"trace_id": call.trace_id, "span_id": call.span_id, "name": call.name}),
            source_topic=topic,
            interaction_id=f"{call.trace_id}:{call.span_id}",
            original=original,
        )

    async def settle(self, ready: Ready) -> None:
        try:
            await self.outcome(ready)
        except Exception as exc:
            log.exception("otlp: settling trace %s failed", ready.trace.trace_id)
            for call in ready.trace.calls.values():
                await self.dead_letter(call, exc, self._topic(call))
        self.ack(self.buffer.settled(ready))

    async def expire_due(self) -> int:
        """Settle the traces held ``kafka.otlp_hold_s`` (in the pool); return how many."""
        due = self.buffer.expired(self.clock.monotonic())
        self.ack(self.buffer.released())
        for ready in due:
            await self.pool.spawn(functools.partial(self.settle, ready))
        return len(due)

    async def handle(self, event: Any, ticket: Ticket) -> None:
        topic = event.message.topic
        self.ctx.metrics.events_in.labels("otlp").inc()
        origin = Origin.of(ticket.tp, ticket.offset)
        model = OtlpTraces if topic == self.ctx.names.otlp else OtlpLogs
        try:
            values = self.ctx.reasons_show_values
            message = decode(event.value, model, self.ctx.settings.limits, values=values)
        except InvalidMessage as exc:
            await self.ctx.dead_letter(exc, "validate", event.value, origin=origin, source_topic=topic)
            self.acks.done(ticket)
            return
        try:
            batch = read_batch(message.model_dump())
        except ValueError as exc:
            await self.ctx.dead_letter(
                InvalidMessage(str(exc)), "otlp", event.value, origin=origin, source_topic=topic
            )
            self.acks.done(ticket)
            return
        if batch.unjoinable:  # pieces without ids: nothing to join them with (pipeline.otlp.read_batch)
            reasons = "; ".join(f"{p.name!r}: {p.reason}" for p in batch.unjoinable)
            await self.ctx.dead_letter(
                InvalidMessage(f"{len(batch.unjoinable)} model-call pieces not mapped: {reasons}"),
                "otlp",
                event.value,
                origin=origin,
                source_topic=topic,
            )
        key: Held = (ticket.tp, ticket.offset, next(self._deliveries))
        self.tickets[key] = ticket
        ready = self.buffer.add(batch, key, self.clock.monotonic())
        self.ack(self.buffer.released())
        for call in ready:
            await self.pool.spawn(functools.partial(self.settle, call))

    def forget(self, tps: Iterable[Any]) -> int:
        lost = set(tps)
        dropped = self.buffer.forget(lost, lambda held: held[0])
        for key in [k for k in self.tickets if k[0] in lost]:
            del self.tickets[key]
        return dropped
