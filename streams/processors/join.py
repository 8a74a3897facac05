"""converted + nli + refusals -> evaluations: the join processor (design: streams/join.py).

Parts are consumed unacked and held in a ``JoinBuffer``; an interaction's parts are acked (in offset
order) once its Evaluation is sent. Emits run in a bounded task pool so the join keeps consuming while
the broker confirms; an expiry loop emits incomplete entries after the join timeout.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

from pipeline.assemble import assemble
from pipeline.metrics.relevance import relevance_question
from schemas.errors import InvalidMessage, JoinTimeout
from schemas.evaluation import Evaluation
from schemas.results import Converted, NliResult, RefusalResult
from streams.acks import OrderedAcks, Ticket
from streams.codec import dead_letter, decode
from streams.context import StreamContext
from streams.join import JoinBuffer, Part, Pending, join_timeout
from streams.resources import Resources
from streams.revoke import forget_on_revoke
from streams.task_pool import TaskPool

log = logging.getLogger(__name__)


def interaction_id_of(part: Part) -> str:
    return part.interaction.interaction_id if isinstance(part, Converted) else part.interaction_id


def first_part(entry: Pending) -> Part:
    part = entry.converted or entry.nli or entry.refusal
    assert part is not None
    return part


class JoinProcessor:
    name = "groundwatch.join"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        settings = ctx.settings
        names = ctx.names
        self.need_refusal = settings.pipeline.refusal_mode != "same"
        self.models: dict[str, type[Part]] = {
            names.converted: Converted,
            names.nli: NliResult,
            names.refusals: RefusalResult,
        }
        self.timeout_s = join_timeout(settings)
        self.buffer = JoinBuffer(
            need_refusal=self.need_refusal,
            timeout_s=self.timeout_s,
            keep_late=settings.kafka.join_emitted_cache,
        )
        self.acks = OrderedAcks()
        self.pool = TaskPool(settings.kafka.stage_concurrency)

    @property
    def inputs(self) -> list[str]:
        names = self.ctx.names
        return [names.converted, names.nli] + ([names.refusals] if self.need_refusal else [])

    def release(self, entry: Pending) -> None:
        for ticket in entry.tickets:
            self.acks.done(ticket)

    # ---- emitting ---------------------------------------------------------------------------------
    async def evaluation(self, entry: Pending) -> Evaluation:
        """The entry's Evaluation; relevance, when on, is scored here (a failure marks it missing)."""
        assert entry.converted is not None
        missing = list(entry.missing(self.need_refusal))
        relevance = None
        scorer = self.resources.relevance
        if scorer is not None:
            interaction = entry.converted.interaction
            try:
                relevance = await scorer.score(relevance_question(interaction), interaction.answer)
            except Exception as exc:
                log.warning("join: relevance of %s failed: %s", entry.interaction_id, exc)
                missing.append("relevance")
        return assemble(
            entry.converted, entry.nli, entry.refusal, self.ctx.settings, relevance=relevance, missing=missing
        )

    async def emit(self, entry: Pending) -> None:
        evaluation = await self.evaluation(entry)
        await self.ctx.send(self.ctx.names.evaluations, entry.interaction_id, evaluation)
        self.ctx.metrics.events_out.labels("join").inc()

    async def dead_letter(self, entry: Pending, exc: Exception) -> None:
        converted = entry.converted
        await self.ctx.send_dead(
            dead_letter(
                stage="join",
                error=exc,
                payload=first_part(entry).model_dump_json(),
                source_topic=None,
                interaction_id=entry.interaction_id,
                original=converted.interaction.model_dump_json() if converted else None,
            )
        )

    async def emit_or_dead_letter(self, entry: Pending) -> None:
        """Emit (complete, late or rebuilt); an error dead-letters the interaction; acks on success."""
        try:
            if entry.converted is None:  # a late part of an interaction that never had its Converted
                log.warning("join: late part of %s without its Converted; dropped", entry.interaction_id)
            else:
                await self.emit(entry)
        except Exception as exc:
            log.exception("join: emitting %s failed", entry.interaction_id)
            try:
                await self.dead_letter(entry, exc)
            except Exception:
                log.exception("join: could not dead-letter %s; its parts stay unacked", entry.interaction_id)
                return
        self.release(entry)

    # ---- expiry -----------------------------------------------------------------------------------
    async def on_expired(self, entry: Pending) -> None:
        missing = entry.missing(self.need_refusal)
        res = await self.resources.wait_ready()
        if await res.store_open.has_complete(entry.interaction_id):
            # a part redelivered after its Evaluation went out (its partition's commit lagged another's)
            log.info("join: %s already evaluated; dropping redelivered %s", entry.interaction_id, entry.tps)
            self.buffer.discard_late(entry.interaction_id)
            return
        if entry.converted is None:
            await self.dead_letter(
                entry, JoinTimeout(f"join timed out after {self.timeout_s}s without {missing}")
            )
            return
        log.warning("join: %s timed out, emitting incomplete (missing %s)", entry.interaction_id, missing)
        await self.emit(entry)

    async def expire_one(self, entry: Pending) -> None:
        try:
            await self.on_expired(entry)
        except Exception:
            log.exception("join: could not emit %s; its parts stay unacked", entry.interaction_id)
            return
        self.release(entry)

    async def expire_loop(self) -> None:
        tick = max(0.05, min(1.0, self.timeout_s / 4))
        while True:
            await asyncio.sleep(tick)
            for entry in self.buffer.expired(time.monotonic()):
                await self.pool.spawn(functools.partial(self.expire_one, entry))

    # ---- consuming --------------------------------------------------------------------------------
    async def handle(self, event: Any, ticket: Ticket) -> None:
        topic = event.message.topic
        self.ctx.metrics.events_in.labels("join").inc()
        try:
            part = decode(event.value, self.models[topic], self.ctx.settings.limits)
        except InvalidMessage as exc:
            if topic != self.ctx.names.converted:  # the nli processor dead-letters a bad Converted
                letter = self.ctx.letter_for(exc, "join", event.value, topic, None)
                await self.ctx.send_dead_or_give_up(letter, f"{topic}@{ticket.offset}")
            self.acks.done(ticket)
            return
        entry = self.buffer.add(interaction_id_of(part), part, ticket, time.monotonic())
        if entry is not None:
            await self.pool.spawn(functools.partial(self.emit_or_dead_letter, entry))

    async def consume(self, stream: Any) -> None:
        expirer = asyncio.create_task(self.expire_loop())
        try:
            async for event in stream.noack().events():
                ticket = self.acks.track(event)
                try:
                    await self.handle(event, ticket)
                except asyncio.CancelledError:
                    raise
                except Exception:  # e.g. the dead letter of a bad part could not be sent
                    log.exception(
                        "join: handling %s offset %s failed; left unacked", event.message.topic, ticket.offset
                    )
        finally:
            expirer.cancel()
            await self.pool.cancel()  # unfinished emits stay unacked and come back

    def register(self) -> Any:
        forget_on_revoke(self.ctx.app, self.name, self.buffer.forget, self.acks.forget)
        source = self.ctx.app.topic(
            *self.inputs,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=self.ctx.settings.kafka.partitions,
        )
        return self.ctx.app.agent(source, name=self.name)(self.consume)
