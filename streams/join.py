"""converted + nli + refusals -> evaluations: one Evaluation per interaction once its parts are in.

Design (at-least-once without transactions or table recovery):

* The join state is an in-memory buffer, not a faust table: on Tansu, table recovery can lose the last
  changelog batch (``end_offsets`` is off by one batch) and there are no transactions to tie a changelog
  write to an offset commit.
* Instead the source events themselves are the durable state. Every part (the Converted, the NliResult,
  the RefusalResult) is consumed with ``noack`` and acked only once its interaction's Evaluation has been
  sent (faust flushes the producer before it commits). Acks go through ``streams.acks.OrderedAcks``, in
  offset order per partition, because faust's own gap handling can commit past a held message. So the
  committed offset of each input partition never passes a part whose Evaluation is not out; after a
  crash the parts are redelivered and the buffer rebuilt.
* All inputs are keyed by interaction_id with the same partition count (co-partitioned), so one worker
  sees every part of an interaction. On a rebalance the buffer forgets the partitions it lost.
* After ``join_timeout_s`` an entry is first checked against ClickHouse: when a complete Evaluation is
  already there, the entry was a part redelivered after its Evaluation went out (the commit of its
  partition lagged behind the other inputs' at a crash) and is dropped. Otherwise an entry with its
  Converted is emitted incomplete (``missing`` names the absent parts); one without its Converted cannot
  be assembled and goes to deadletter (stage "join").
* Duplicates downstream are harmless: the ``evaluations`` table is a ReplacingMergeTree on interaction_id
  whose version prefers complete rows.

Cost: a part held for long (a slow or failed stage) holds back the committed offset of its partition, so
more is redelivered after a crash; the join timeout bounds it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from schemas.results import Converted, NliResult, RefusalResult
from streams.acks import OrderedAcks, Ticket
from streams.codec import DecodeError, dead_letter, decode
from streams.context import StreamContext

log = logging.getLogger(__name__)

Part = Converted | NliResult | RefusalResult


class JoinTimeout(Exception):
    """An interaction's parts did not all arrive within the join timeout."""


@dataclass
class Pending:
    interaction_id: str
    first_seen: float
    converted: Converted | None = None
    nli: NliResult | None = None
    refusal: RefusalResult | None = None
    tickets: list[Ticket] = field(default_factory=list)
    tps: set[Any] = field(default_factory=set)

    def missing(self, need_refusal: bool) -> list[str]:
        out = []
        if self.converted is None:
            out.append("converted")
        if self.nli is None:
            out.append("nli")
        if need_refusal and self.refusal is None:
            out.append("refusal")
        return out


class JoinBuffer:
    """Pure join state: parts in, complete or expired entries out (no Kafka here)."""

    def __init__(self, *, need_refusal: bool, timeout_s: float) -> None:
        self.need_refusal = need_refusal
        self.timeout_s = timeout_s
        self._entries: dict[str, Pending] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, iid: str, part: Part, ticket: Ticket | None, now: float) -> Pending | None:
        """Add one part; return (and remove) the entry when it is complete."""
        entry = self._entries.get(iid)
        if entry is None:
            entry = self._entries[iid] = Pending(interaction_id=iid, first_seen=now)
        if isinstance(part, Converted):
            entry.converted = part
        elif isinstance(part, NliResult):
            entry.nli = part
        else:
            entry.refusal = part
        if ticket is not None:
            entry.tickets.append(ticket)
            entry.tps.add(ticket.tp)
        if not entry.missing(self.need_refusal):
            return self._entries.pop(iid)
        return None

    def expired(self, now: float) -> list[Pending]:
        out = [e for e in self._entries.values() if now - e.first_seen >= self.timeout_s]
        for e in out:
            del self._entries[e.interaction_id]
        return out

    def forget(self, tps: Iterable[Any]) -> int:
        lost = set(tps)
        gone = [iid for iid, e in self._entries.items() if e.tps & lost]
        for iid in gone:
            del self._entries[iid]
        return len(gone)


def register(ctx: StreamContext) -> Any:
    settings = ctx.settings
    names = ctx.names
    need_refusal = settings.pipeline.refusal_mode != "same"
    inputs = [names.converted, names.nli] + ([names.refusals] if need_refusal else [])
    source = ctx.app.topic(
        *inputs,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.kafka.partitions,
    )
    models: dict[str, type[Part]] = {
        names.converted: Converted,
        names.nli: NliResult,
        names.refusals: RefusalResult,
    }
    buffer = JoinBuffer(need_refusal=need_refusal, timeout_s=settings.kafka.join_timeout_s)
    acks = OrderedAcks()

    def release(entry: Pending) -> None:
        for ticket in entry.tickets:
            acks.done(ticket)

    async def emit(entry: Pending) -> None:
        from pipeline.assemble import assemble

        assert entry.converted is not None
        missing = list(entry.missing(need_refusal))
        relevance = None
        scorer = ctx.res.relevance
        if scorer is not None:  # seed 004 relevance; a failure leaves it out, marked missing, never the row
            interaction = entry.converted.interaction
            try:
                relevance = await scorer.score(interaction.question, interaction.answer)
            except Exception as exc:
                log.warning("join: relevance of %s failed: %s", entry.interaction_id, exc)
                missing.append("relevance")
        evaluation = assemble(
            entry.converted, entry.nli, entry.refusal, settings, relevance=relevance, missing=missing
        )
        await ctx.send(names.evaluations, entry.interaction_id, evaluation)

    async def on_expired(entry: Pending) -> None:
        missing = entry.missing(need_refusal)
        res = await ctx.res.wait_ready()
        if await res.store.has_complete(entry.interaction_id):
            # a part redelivered after its Evaluation went out (its partition's commit lagged another's)
            log.info("join: %s already evaluated; dropping redelivered %s", entry.interaction_id, entry.tps)
            return
        if entry.converted is None:
            err = JoinTimeout(f"join timed out after {settings.kafka.join_timeout_s}s without {missing}")
            payload = (entry.nli or entry.refusal or entry.converted).model_dump_json()  # type: ignore[union-attr]
            await ctx.send_dead(
                dead_letter(
                    stage="join",
                    error=err,
                    payload=payload,
                    source_topic=None,
                    interaction_id=entry.interaction_id,
                )
            )
            return
        log.warning("join: %s timed out, emitting incomplete (missing %s)", entry.interaction_id, missing)
        await emit(entry)

    async def expire_loop() -> None:
        tick = max(0.05, min(1.0, settings.kafka.join_timeout_s / 4))
        while True:
            await asyncio.sleep(tick)
            for entry in buffer.expired(time.monotonic()):
                try:
                    await on_expired(entry)
                except Exception:
                    log.exception("join: could not emit %s; its parts stay unacked", entry.interaction_id)
                    continue
                release(entry)

    async def on_revoked(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        revoked = set(args[0]) if args else set()
        n = buffer.forget(revoked)
        acks.forget(revoked)
        if n:
            log.info("join: forgot %d pending interactions of revoked partitions", n)

    ctx.app.on_partitions_revoked.connect(cast(Any, on_revoked))

    async def join_agent(stream: Any) -> None:
        expirer = asyncio.create_task(expire_loop())
        try:
            async for event in stream.noack().events():
                ticket = acks.track(event)
                topic = event.message.topic
                raw = event.value
                try:
                    part = decode(raw, models[topic], settings.limits)
                except DecodeError as exc:
                    if topic != names.converted:  # the nli processor dead-letters a bad Converted
                        await ctx.send_dead(
                            dead_letter(stage="validate", error=exc, payload=raw, source_topic=topic)
                        )
                    acks.done(ticket)
                    continue
                iid = part.interaction.interaction_id if isinstance(part, Converted) else part.interaction_id
                entry = buffer.add(iid, part, ticket, time.monotonic())
                if entry is not None:
                    try:
                        await emit(entry)
                    except Exception as exc:
                        log.exception("join: assemble failed for %s", iid)
                        await ctx.send_dead(
                            dead_letter(
                                stage="join", error=exc, payload=raw, source_topic=topic, interaction_id=iid
                            )
                        )
                    release(entry)
        finally:
            expirer.cancel()

    return ctx.app.agent(source, name="groundwatch.join")(join_agent)
