"""Work that spans interactions has one owner: touches keyed by (app, model) and (app, model,
conversation_id), partitioned as Kafka's producer does, marked only in the closers of the partition's
owner; a rebalance forgets what moved and the new owner finds it in ClickHouse."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner
from pydantic import ValidationError

from pipeline.clock import ManualClock
from schemas.settings import WindowSettings
from schemas.touch import Touch, touch_key
from streams.clickhouse.store import ClickHouseStore
from streams.ownership import Ownership, partition_of
from streams.processors.touches import TouchesProcessor
from streams.resources import Resources
from streams.testing import Event, Message, fake_context
from streams.touches import TouchSender, touches_of
from streams.windows.closer import WindowCloser
from streams.windows.tumbling import TumblingWindows
from tests.fixtures.evaluations import evaluation
from tests.settings_factory import make_settings

NOW = datetime(2026, 11, 20, 12, 34, 56, tzinfo=UTC)
HOUR = TumblingWindows(3600)


def row(app: str, at: datetime, conversation_id: str | None = None, ends: bool = False) -> SimpleNamespace:
    interaction = SimpleNamespace(metadata={"conversation_end": True} if ends else {})
    return SimpleNamespace(app=app, model="m", timestamp=at, conversation_id=conversation_id,
                           interaction=interaction)  # fmt: skip


def test_a_key_lands_where_kafkas_default_partitioner_puts_it() -> None:
    """What the sink's producer does with a key (murmur2) and what an owner looks for agree."""
    partitioner = DefaultPartitioner()
    for n in (1, 2, 3, 12):
        for key in (touch_key("wiki-qa", "beta"), touch_key("a", "m", "conv-7"), touch_key("ü", "\ud800")):
            assert partition_of(key, n) == partitioner(key.encode(), list(range(n)), [])


def test_keys_are_ascii_and_tell_a_series_from_its_conversations() -> None:
    assert json.loads(touch_key("a", "m")) == ["a", "m"]
    assert json.loads(touch_key("a", "m", "c")) == ["a", "m", "c"]
    touch_key("\ud800", "m").encode("ascii")  # a lone surrogate in an app name still keys


def test_one_touch_per_series_and_per_conversation_of_a_write() -> None:
    t = HOUR.start_of(NOW)
    rows = [
        row("a", t + timedelta(minutes=1), "c1"),
        row("a", t + timedelta(minutes=5), "c1", ends=True),
        row("a", t + timedelta(minutes=70)),  # the next window, no conversation
        row("b", t + timedelta(minutes=2), "c2"),
    ]
    touches = {(x.app, x.conversation_id): x for x in touches_of(rows, HOUR)}
    assert set(touches) == {("a", None), ("b", None), ("a", "c1"), ("b", "c2")}
    assert touches[("a", None)].at == [
        t + timedelta(minutes=5),
        t + timedelta(minutes=70),
    ]  # latest per window
    c1 = touches[("a", "c1")]
    assert (c1.at, c1.ends, c1.watermark) == ([t + timedelta(minutes=5)], True, t + timedelta(minutes=70))
    assert {(x.app, x.conversation_id) for x in touches_of(rows, HOUR, conversations=False)} == {
        ("a", None),
        ("b", None),
    }


def test_a_touch_refuses_an_end_without_a_conversation_and_an_empty_list() -> None:
    with pytest.raises(ValidationError):
        Touch(app="a", model="m", at=[NOW], ends=True, watermark=NOW)
    with pytest.raises(ValidationError):
        Touch(app="a", model="m", at=[], watermark=NOW)
    with pytest.raises(ValidationError):
        Touch(app="a", model="m", at=[NOW], watermark=NOW, extra=1)  # type: ignore[call-arg]


def test_ownership_follows_assignments() -> None:
    own = Ownership("t", lambda: 4)
    assert own.suspended and not own.rebalancing and not own.lost(0)  # nothing assigned yet: nothing lost
    assert own.assign([0, 1]) == (frozenset({0, 1}), frozenset())
    key = touch_key("a", "m")
    assert own.owns("a", "m") == (partition_of(key, 4) in {0, 1})
    own.revoke()
    assert own.rebalancing and not own.owns_partition(0) and not own.lost(0)  # the last assignment stands
    assert own.assign([1, 2]) == (frozenset({2}), frozenset({0}))
    assert own.lost(0) and not own.lost(2)
    only_new = own.within(frozenset({2}))
    for app in (f"app{i}" for i in range(20)):
        assert only_new(app, "m") == (partition_of(touch_key(app, "m"), 4) == 2)


async def test_two_owners_reconcile_disjoint_halves_of_the_stale_windows(store: ClickHouseStore) -> None:
    """Rows of twenty series with no window written: each of two workers finds the stale windows of
    the series it owns, together all of them, none twice; a rebalance that takes a partition forgets
    its windows."""
    rows = [
        evaluation(f"i{i}").model_copy(update={"app": f"app{i}", "timestamp": NOW - timedelta(hours=1)})
        for i in range(20)
    ]
    await store.insert_evaluations(rows)
    settings = WindowSettings(size_seconds=3600)
    # the worker's clock a year ahead of the server's: reconcile looks back on the server's clock, the
    # one the rows' inserted_at are stamped with
    clock = ManualClock(NOW + timedelta(days=365))
    owners = [Ownership("t", lambda: 4), Ownership("t", lambda: 4)]
    owners[0].assign([0, 1])
    owners[1].assign([2, 3])
    closers = [WindowCloser(settings, store, clock=clock) for _ in owners]
    found = [await c.reconcile(timedelta(hours=24), o.owns) for c, o in zip(closers, owners, strict=True)]
    pending = [set(c.pending()) for c in closers]
    assert sum(found) == 20 and not pending[0] & pending[1]
    assert {k[0] for k in pending[0] | pending[1]} == {f"app{i}" for i in range(20)}
    owners[0].assign([0])
    forgot = closers[0].forget(owners[0].owns)
    assert forgot == len([k for k in pending[0] if partition_of(touch_key(k[0], k[1]), 4) == 1])
    assert all(owners[0].owns(app, model) for app, model, _ in closers[0].pending())


def _resources() -> Resources:
    settings = make_settings(conversations={"enabled": True})
    return Resources(fake_context(settings))


async def test_the_sink_touches_the_owners_of_its_rows_windows_and_conversations() -> None:
    resources = _resources()
    ctx = resources.ctx
    rows = [row("a", NOW, "c1"), row("a", NOW + timedelta(seconds=1), "c1"), row("b", NOW)]
    await TouchSender(ctx).written(rows)
    topic = ctx.topics[ctx.names.touches]
    keys = sorted(k.decode() for k in topic.keys if k is not None)
    assert keys == sorted([touch_key("a", "m"), touch_key("b", "m"), touch_key("a", "m", "c1")])
    sent = [Touch.model_validate_json(v) for v in topic.sent]
    assert all(t.key.encode() == k for t, k in zip(sent, topic.keys, strict=True))


async def test_a_touch_from_a_partition_given_away_is_dropped(store: ClickHouseStore) -> None:
    """A touch read before a rebalance gave its partition to another worker marks nothing here; one of
    an owned partition marks the window."""
    resources = _resources()
    resources._windows = WindowCloser(WindowSettings(size_seconds=3600), store, clock=ManualClock(NOW))
    resources._ready.set()
    processor = TouchesProcessor(resources.ctx, resources)
    touch = Touch(app="a", model="m", at=[NOW], watermark=NOW)
    mine = partition_of(touch.key, 2)
    resources.ownership = Ownership(resources.ctx.names.touches, lambda: 2)
    resources.ownership.assign([1 - mine])
    await processor.handle(Event(touch.model_dump_json().encode(), message=Message("t", mine, 0)))
    assert resources.windows.pending() == []
    resources.ownership.assign([mine])
    await processor.handle(Event(touch.model_dump_json().encode(), message=Message("t", mine, 1)))
    assert resources.windows.pending() == [("a", "m", HOUR.start_of(NOW))]


class HeldStore:
    """A window store whose reads wait for ``release``; it records the windows written."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reads = 0
        self.written: list[datetime] = []

    async def rows_of_windows(self, app: str, model: str, starts: object, size_seconds: int) -> list[object]:
        self.reads += 1
        await self.release.wait()
        return []

    async def insert_windows(self, windows: list[Any], computed_at: datetime) -> None:
        self.written += [w.window_start for w in windows]

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[object]:
        return []

    async def server_now(self) -> datetime:
        return datetime(2026, 11, 20, tzinfo=UTC)


async def test_a_revocation_lets_the_batch_under_way_end_and_begins_no_other() -> None:
    """While a rebalance moves the partitions, the round under way ends after its batch (the revoke
    waits for it) and no round begins until the next assignment."""
    held = HeldStore()
    clock = ManualClock(NOW)
    closer = WindowCloser(WindowSettings(size_seconds=60, close_batch=1), held, clock=clock)  # type: ignore[arg-type]
    await closer.touch([row("a", NOW - timedelta(hours=2)), row("a", NOW - timedelta(hours=1))])
    round_ = asyncio.create_task(closer.close_due(final=True))
    for _ in range(10):  # to the batch's read
        await asyncio.sleep(0)
    assert held.reads == 1
    pausing = asyncio.create_task(closer.pause(wait_s=5))
    await asyncio.sleep(0)
    assert not pausing.done()  # waits for the batch under way
    held.release.set()
    assert await pausing is True
    assert len(await round_) == 1 and len(held.written) == 1  # the second batch was not begun
    assert await closer.close_due(final=True) == []  # paused: no round
    closer.resume()
    assert len(await closer.close_due(final=True)) == 1
