"""converted + judged -> evaluations: the join processor (design: streams/join.py).

Parts are consumed unacked and held in a ``JoinBuffer`` (one entry per message); a message's parts are
acked (in offset order) once its outcome is out: its Evaluation sent, or its dead letter sent or given
up (``settle``). Emits run in a bounded task pool so the join keeps consuming while the broker
confirms; an expiry loop settles incomplete entries after the join timeout.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from pipeline.assemble import assemble
from pipeline.clock import Clock
from pipeline.custom_evaluators import with_custom
from pipeline.metrics.relevance import score_relevance
from pipeline.privacy.mask import restore_interaction
from pipeline.retry import Backoff, retry
from pipeline.topic_assignment import with_topic
from schemas.errors import InvalidMessage, JoinTimeout
from schemas.evaluation import Evaluation
from schemas.topics import TOPIC_MESSAGES
from streams.acks import OrderedAcks, Ticket
from streams.codec import Origin, decode
from streams.context import StreamContext
from streams.join import JoinBuffer, Part, Pending, join_timeout
from streams.processors.holding import HoldingProcessor
from streams.resources import Resources
from streams.task_pool import TaskPool

log = logging.getLogger(__name__)


def first_part(entry: Pending) -> Part:
    part = entry.converted or entry.judged
    assert part is not None
    return part


class JoinProcessor(HoldingProcessor):
    name = "groundwatch.join"
    stage = "join"

    def __init__(self, ctx: StreamContext, resources: Resources, clock: Clock | None = None) -> None:
        self.ctx = ctx
        self.resources = resources
        #: the join timeout is measured on it and the expiry loop waits on it (default: the worker's)
        self.clock: Clock = clock or resources.clock
        settings = ctx.settings
        names = ctx.names
        self.need_refusal = settings.pipeline.refusal_mode != "same"
        self.models: dict[str, type[Part]] = {
            names.converted: TOPIC_MESSAGES.converted,
            names.judged: TOPIC_MESSAGES.judged,
        }
        self.timeout_s = join_timeout(settings)
        self.buffer = JoinBuffer(
            timeout_s=self.timeout_s,
            keep_late=settings.kafka.join_emitted_cache,
        )
        self.acks = OrderedAcks()
        self.pool = TaskPool(settings.kafka.stage_concurrency)

    @property
    def inputs(self) -> list[str]:
        names = self.ctx.names
        return [names.converted, names.judged]

    @property
    def hold_s(self) -> float:
        return self.timeout_s

    def release(self, entry: Pending) -> None:
        for ticket in entry.tickets:
            self.acks.done(ticket)

    # ---- emitting ---------------------------------------------------------------------------------
    async def evaluation(self, entry: Pending) -> Evaluation:
        """The entry's Evaluation with its custom scores (from the judge result)."""
        evaluation = await self._core_evaluation(entry)
        assert entry.converted is not None
        if self.resources.arguments is not None:
            evaluation = await self.resources.arguments.review(evaluation, entry.converted.interaction)
        if entry.judged is None:
            return evaluation
        return with_custom(evaluation, entry.judged.custom, entry.judged.custom_calls)

    async def _core_evaluation(self, entry: Pending) -> Evaluation:
        """The entry's Evaluation with its topic (when topics are assigned)."""
        assert entry.converted is not None
        evaluation = await self._assembled(entry)
        return await with_topic(self.resources.topics, evaluation, entry.converted.interaction.question)

    async def _assembled(self, entry: Pending) -> Evaluation:
        """The entry's verdicts assembled; relevance, when on, is scored here (a failure marks it missing)."""
        assert entry.converted is not None
        missing = list(entry.missing(self.need_refusal))
        scorer = self.resources.relevance
        if scorer is None:
            return assemble(
                entry.converted, entry.nli, entry.refusal, self.ctx.settings,
                evaluated_at=self.clock.now(), missing=missing,
            )  # fmt: skip
        relevance = await score_relevance(scorer, entry.converted.interaction)
        return assemble(
            entry.converted, entry.nli, entry.refusal, self.ctx.settings, evaluated_at=self.clock.now(),
            relevance=relevance.value,
            missing=[*missing, "relevance"] if relevance.failed else missing,
            extra_seconds={"relevance": relevance.seconds},
        )  # fmt: skip

    def origin(self, entry: Pending) -> Origin | None:
        """Where the entry's message was read, for its dead letter's id: its Converted's offset, else
        the earliest of its parts'."""
        if not entry.tickets:
            return None
        converted = [
            t for t in entry.tickets if str(getattr(t.tp, "topic", t.tp)) == self.ctx.names.converted
        ]
        ticket = converted[0] if converted else min(entry.tickets, key=lambda t: (str(t.tp), t.offset))
        return Origin.of(ticket.tp, ticket.offset)

    async def dead_letter(self, entry: Pending, exc: BaseException) -> None:
        """Dead-letter the message (stage "join"): sent, or given up after its attempts; never raises."""
        converted = entry.converted
        await self.ctx.dead_letter(
            exc,
            "join",
            first_part(entry).model_dump_json(),
            origin=self.origin(entry),
            interaction_id=entry.interaction_id,
            original=(
                restore_interaction(converted.interaction, converted.originals).model_dump_json()
                if converted
                else None
            ),
        )

    async def emit(self, entry: Pending) -> None:
        """Send the entry's Evaluation, retried (``pipeline.retry``, ``kafka.deadletter_attempts`` times
        in all); when it cannot be sent, dead-letter the message."""
        evaluation = await self.evaluation(entry)
        send = functools.partial(self.ctx.send, self.ctx.names.evaluations, entry.interaction_id, evaluation)
        tried = await retry(
            send,
            what=f"join: emitting {entry.interaction_id}",
            attempts=self.ctx.settings.kafka.deadletter_attempts,
            backoff=Backoff(first_s=self.ctx.retry_delay_s),
            sleep=self.ctx.clock.sleep,
        )
        if tried.error is not None:
            await self.dead_letter(entry, tried.error)
            return
        self.ctx.metrics.events_out.labels("join").inc()

    async def already_stored(self, entry: Pending) -> bool:
        """A complete Evaluation of the interaction is in ClickHouse (the entry is a redelivered part,
        or an incomplete message whose row could not replace a complete one). When ClickHouse cannot
        say, False: emitting a duplicate is harmless, losing the entry is not."""
        res = await self.resources.wait_ready()
        try:
            interaction = entry.converted.interaction if entry.converted is not None else None
            where = (interaction.app, interaction.model, interaction.timestamp) if interaction else None
            stored = await res.store_open.has_complete(entry.interaction_id, where)
        except Exception as exc:
            log.warning(
                "join: could not ask ClickHouse whether %s is stored (%s: %s); emitting it anyway",
                entry.interaction_id, type(exc).__name__, str(exc)[:300],
            )  # fmt: skip
            return False
        if stored:
            log.info("join: %s already evaluated; dropping %s", entry.interaction_id, entry.tps)
            self.buffer.discard_late(entry.key)
        return stored

    async def outcome(self, entry: Pending, expired: bool) -> None:
        """Emit the entry (complete, late, rebuilt, or incomplete after the timeout) or dead-letter it."""
        if expired and await self.already_stored(entry):
            return
        missing = entry.missing(self.need_refusal)
        if entry.converted is None:
            if expired:
                timeout = JoinTimeout(f"join timed out after {self.timeout_s}s without {missing}")
                await self.dead_letter(entry, timeout)
            else:  # a late part of a message that never had its Converted (dead-lettered when it expired)
                log.warning("join: late part of %s without its Converted; dropped", entry.interaction_id)
            return
        if expired:
            log.warning("join: %s timed out, emitting incomplete (missing %s)", entry.interaction_id, missing)
        await self.emit(entry)

    async def settle(self, entry: Pending, expired: bool = False) -> None:
        """The entry's outcome, then the ack of its parts: they are acked once the Evaluation or the dead
        letter is out (or given up), never left to hold their partitions back. Only cancellation (the
        worker stopping) leaves them unacked, to come back."""
        try:
            await self.outcome(entry, expired)
        except Exception as exc:  # assembling it failed: the message cannot be evaluated
            log.exception("join: settling %s failed", entry.interaction_id)
            await self.dead_letter(entry, exc)
        self.release(entry)

    # ---- expiry -----------------------------------------------------------------------------------
    async def expire_due(self) -> int:
        """Settle the entries past the join timeout (in the pool); return how many."""
        due = self.buffer.expired(self.clock.monotonic())
        for entry in due:
            await self.pool.spawn(functools.partial(self.settle, entry, True))
        return len(due)

    # ---- consuming --------------------------------------------------------------------------------
    async def handle(self, event: Any, ticket: Ticket) -> None:
        topic = event.message.topic
        self.ctx.metrics.events_in.labels("join").inc()
        try:
            part = decode(
                event.value,
                self.models[topic],
                self.ctx.settings.limits,
                between_stages=True,
                values=self.ctx.reasons_show_values,
            )
        except InvalidMessage as exc:
            if topic != self.ctx.names.converted:  # the judge processor dead-letters a bad Converted
                await self.ctx.dead_letter(
                    exc, "validate", event.value, origin=Origin.of(ticket.tp, ticket.offset)
                )
            self.acks.done(ticket)
            return
        entry = self.buffer.add(part, ticket, self.clock.monotonic())
        if entry is not None:
            await self.pool.spawn(functools.partial(self.settle, entry))

    def forget(self, tps: Iterable[Any]) -> int:
        return self.buffer.forget(tps)
