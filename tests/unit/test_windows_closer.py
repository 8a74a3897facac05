"""Closing windows from ClickHouse rows (so duplicates never count twice) and the alert rules on them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.clock import ManualClock
from schemas.alert import Alert, AlertRule, AlertRules
from schemas.settings import AlertSettings, ClickHouseSettings, WindowSettings
from streams.alerts.engine import AlertEngine
from streams.clickhouse.store import ClickHouseStore
from streams.windows.closer import WindowCloser
from streams.windows.tumbling import TumblingWindows
from tests.fixtures.evaluations import NOW, T0, at, evaluation


async def test_windows_close_by_watermark_and_count_replays_once(store: ClickHouseStore) -> None:
    closer = WindowCloser(WindowSettings(size_seconds=10, grace_seconds=2, idle_close_seconds=1000), store)
    first = [at("a", 1, 0.9), at("b", 5, 0.2), at("c", 11, 0.9)]
    await store.insert_evaluations(first)  # type: ignore[arg-type]
    await store.insert_evaluations(first[:2])  # type: ignore[arg-type]  # redelivered
    await closer.touch(first)  # type: ignore[arg-type]
    await closer.touch(first[:2])  # type: ignore[arg-type]
    assert closer.due() == []  # watermark 11 s < end 10 s + grace 2 s
    await closer.touch([at("d", 12.5, 0.9)])  # type: ignore[list-item]
    await store.insert_evaluations([at("d", 12.5, 0.9)])  # type: ignore[list-item]
    closed = await closer.close_due()
    assert [(w.window_start, w.count, w.hallucinations) for w in closed] == [(T0, 2, 1)]
    # a late row for the closed window: it is recomputed, and the rewrite replaces the old row
    await store.insert_evaluations([at("late", 9, 0.1)])  # type: ignore[list-item]
    await closer.touch([at("late", 9, 0.1)])  # type: ignore[list-item]
    closed = await closer.close_due()
    assert [(w.count, w.hallucinations) for w in closed] == [(3, 2)]
    first_window = [w for w in store.windows_sync() if w.window_start.replace(tzinfo=UTC) == T0]
    assert [w.count for w in first_window] == [3]
    assert [k[2] for k in closer.pending()] == [T0 + timedelta(seconds=10)]
    assert [w.count for w in await closer.close_due(final=True)] == [2]


async def test_a_window_touched_again_by_rows_it_counted_is_not_written_again(store: ClickHouseStore) -> None:
    """The touch of rows a close already read (it came after the read, or a redelivery sent it again)
    closes nothing: the aggregate is the one last written, so the rules and the insert are skipped; a
    new row in it closes it again."""
    closer = WindowCloser(WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000), store)
    rows = [at("a", 1, 0.9), at("b", 5, 0.2), at("c", 11, 0.9)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    await closer.touch(rows)  # type: ignore[arg-type]
    [w] = await closer.close_due()
    await closer.touch(rows[:2])  # type: ignore[arg-type]
    assert (
        await closer.close_due() == []
        and closer.unchanged == 1
        and closer.pending() == [("a", "m", T0 + timedelta(seconds=10))]
    )
    late = at("d", 7, 0.9)
    await store.insert_evaluations([late])  # type: ignore[list-item]
    await closer.touch([late])  # type: ignore[list-item]
    [again] = await closer.close_due()
    assert (w.count, again.count, closer.written) == (2, 3, 2)


@pytest.mark.parametrize(
    ("now", "before", "after"),
    [
        (T0 + timedelta(seconds=20), 4.9, 0.1),  # ended long ago: due once idle for 5 s
        (T0 + timedelta(seconds=1), 6, 3),  # idle at T0 + 7 s, but due only once it ended at T0 + 10 s
    ],
    ids=["idle", "ended"],
)
async def test_an_idle_window_closes_once_it_ended_on_the_wall_clock(
    store: ClickHouseStore, now: datetime, before: float, after: float
) -> None:
    """A window no row landed in for idle_close_seconds closes without its watermark passing, but not
    before its end on the wall clock (a window still running is not closed early)."""
    clock = ManualClock(now)
    settings = WindowSettings(size_seconds=10, grace_seconds=2, idle_close_seconds=5)
    closer = WindowCloser(settings, store, clock=clock)
    await closer.touch([at("a", 1, 0.9)])  # type: ignore[list-item]
    clock.advance(before)
    assert closer.due() == []
    clock.advance(after)
    assert closer.due() == [("a", "m", T0)]


async def test_alert_engine_pools_last_k_windows_and_fires_once(store: ClickHouseStore) -> None:
    rule = AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=2, min_interactions=4,
                     cooldown_seconds=0)  # fmt: skip
    published: list[Alert] = []

    async def publish(alert: Alert, key: str) -> None:
        published.append(alert)

    engine = AlertEngine(AlertRules(rules=[rule]), AlertSettings(), TumblingWindows(10), store, publish)
    closer = WindowCloser(
        WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000), store, engine
    )
    # window 1: 2 of 2 hallucinate (under min_interactions alone); window 2: 1 of 3 -> pooled 3/5 = 0.6
    rows = [at("a", 1, 0.1), at("b", 2, 0.2), at("c", 11, 0.1), at("d", 12, 0.9), at("e", 13, 0.9)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    await closer.touch(rows)  # type: ignore[arg-type]
    await closer.close_due(final=True)
    assert [(a.value, a.interactions, a.window_start) for a in published] == [(0.6, 5, T0)]
    assert len(store.alerts_sync()) == 1
    await closer.touch(rows[-1:])  # type: ignore[arg-type]  # recomputed: the same alert is not sent again
    await closer.close_due(final=True)
    assert len(published) == 1
    await engine.aclose()


async def test_a_resend_later_that_day_moves_its_row_to_another_window_and_recomputes_both(
    store: ClickHouseStore,
) -> None:
    """The event day is part of the key (migration 011): the same interaction sent again later that day
    (a replay stamps records that carry no timestamp) replaces its row, which moves to its new window;
    both windows are recomputed and it is counted once across them."""
    from streams.clickhouse.sink import EvaluationSink

    closer = WindowCloser(WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000), store)

    async def touch(rows: list[Any], before: list[Any]) -> None:  # as the windows' owner is touched
        await closer.touch([*before, *rows])

    sink = EvaluationSink(ClickHouseSettings(batch_rows=100), store, before_ack=touch)
    await sink.add(at("x", 1, 0.9))  # type: ignore[arg-type]
    await sink.flush()
    assert [w.count for w in await closer.close_due(final=True)] == [1]
    resent = at("x", 25, 0.9).model_copy(update={"evaluated_at": NOW + timedelta(hours=1)})  # type: ignore[attr-defined]
    await sink.add(resent)
    await sink.flush()
    closed = {w.window_start: w.count for w in await closer.close_due(final=True)}
    assert closed == {T0: 0, T0 + timedelta(seconds=20): 1}
    assert sum(w.count for w in store.windows_sync()) == 1  # counted once across windows


def located(app: str, seconds: float) -> object:
    e = evaluation(f"{app}-{seconds}")
    return e.model_copy(update={"app": app, "timestamp": T0 + timedelta(seconds=seconds)})


async def test_a_future_event_closes_neither_other_apps_windows_nor_its_own_early(
    store: ClickHouseStore,
) -> None:
    settings = WindowSettings(size_seconds=10, grace_seconds=2, idle_close_seconds=1000, max_skew_seconds=60)
    wall = T0 + timedelta(seconds=5)  # "now" is inside the first window
    closer = WindowCloser(settings, store, clock=ManualClock(wall))
    await closer.touch([located("a", 1), located("b", 1)])  # type: ignore[list-item]
    await closer.touch([located("b", 10 * 365 * 86400)])  # type: ignore[list-item]  # a clock bug
    assert closer.watermarks[("b", "m")] == wall + timedelta(seconds=60)  # clamped to wall + max skew
    assert ("a", "m", T0) not in closer.due()  # app a's window is still open
    assert ("b", "m", T0) in closer.due()  # b's own watermark passed it (by at most the skew)
    assert ("b", "m", T0 + timedelta(days=3650)) not in closer.due()


async def test_a_failed_publish_leaves_no_alert_row_and_is_retried(store: ClickHouseStore) -> None:
    rule = AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=1, min_interactions=2,
                     cooldown_seconds=0)  # fmt: skip
    published: list[Alert] = []
    broker_up = False

    async def publish(alert: Alert, key: str) -> None:
        if not broker_up:
            raise ConnectionError("broker down")
        assert key == alert.alert_id  # keyed by alert_id: consumers dedupe on it
        published.append(alert)

    engine = AlertEngine(AlertRules(rules=[rule]), AlertSettings(), TumblingWindows(10), store, publish)
    closer = WindowCloser(
        WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000), store, engine
    )
    rows = [at("a", 1, 0.1), at("b", 2, 0.2)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    await closer.touch(rows)  # type: ignore[arg-type]
    await closer.close_due(final=True)
    assert published == [] and store.alerts_sync() == []  # not marked fired: it will be sent again
    assert closer.pending() == [("a", "m", T0)]  # the window stays due
    broker_up = True
    await closer.close_due(final=True)
    assert len(published) == 1 and len(store.alerts_sync()) == 1 and closer.pending() == []
    await engine.aclose()


async def test_a_failed_webhook_is_logged(store: ClickHouseStore, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from pydantic import SecretStr

    from streams.windows.aggregator import WindowStats

    rule = AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=1, min_interactions=1,
                     cooldown_seconds=0)  # fmt: skip
    hook = AlertSettings(webhook_url=SecretStr("http://127.0.0.1:1/hook"), webhook_retries=0)
    engine = AlertEngine(AlertRules(rules=[rule]), hook, TumblingWindows(10), store, None)
    rows = [at("a", 1, 0.1)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    window = WindowStats().extend(await store.rows_between("a", "m", T0, T0 + timedelta(seconds=10)))
    with caplog.at_level(logging.ERROR):
        fired = await engine.on_window(
            window.result(window_start=T0, window_end=T0 + timedelta(seconds=10), app="a", model="m")
        )
        await engine.aclose()
    assert len(fired) == 1 and "webhook delivery failed" in caplog.text


async def test_a_window_whose_alert_rules_failed_is_evaluated_at_the_next_start(
    store: ClickHouseStore,
) -> None:
    """ClickHouse reads the window's rows and writes its aggregate but does not answer the alert rules'
    query: the window stays due and the stop leaves it; the next start finds it (``reconcile``) and
    evaluates its rules, making the transition once; the start after that finds nothing left."""
    rule = AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=1, min_interactions=2,
                     cooldown_seconds=0)  # fmt: skip
    settings = WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000)

    class AlertQueryDown:
        """The store, but the alert rules' read of their latest transition times out."""

        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        async def latest_alert(self, *args: object, **kwargs: object) -> Alert | None:
            raise TimeoutError("ClickHouse did not answer in time")

    def worker(alerts_store: object) -> WindowCloser:
        engine = AlertEngine(AlertRules(rules=[rule]), AlertSettings(), TumblingWindows(10), alerts_store)  # type: ignore[arg-type]
        return WindowCloser(settings, store, engine)

    rows = [at("a", 1, 0.1), at("b", 2, 0.2)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    first = worker(AlertQueryDown())
    await first.touch(rows)  # type: ignore[arg-type]
    assert await first.close_due(final=True) == []
    assert first.pending() == [("a", "m", T0)]  # the window stays due
    assert (await first.finish(budget_s=10.0)).left == 1 and store.alerts_sync() == []

    second = worker(store)  # the next start
    assert await second.reconcile(timedelta(hours=24)) == 1
    assert [w.window_start for w in await second.close_due(final=True)] == [T0]
    assert [(a.rule, a.state, a.window_start) for a in store.alerts_sync()] == [("h", "firing", T0)]

    third = worker(store)
    assert await third.reconcile(timedelta(hours=24)) == 0  # closed, its alerts evaluated: nothing left


async def test_a_window_whose_alert_rules_failed_holds_the_later_windows_of_its_app(
    store: ClickHouseStore,
) -> None:
    """The first window hallucinates (the rule fires), the second is grounded (it resolves). Storing the
    first window's transition is refused in the first round: the second waits with it instead of being
    evaluated without it, and the next round evaluates both in order, firing at the first and resolving
    at the second (not a firing for the first made after the second and left open)."""
    rule = AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=1, min_interactions=2,
                     cooldown_seconds=0, resolve_for=1)  # fmt: skip
    refusing = True

    class FirstWindowRefused:
        """The store, but a transition of the window at T0 is refused (not an outage)."""

        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        async def insert_alert(self, alert: Alert) -> None:
            if refusing and alert.window_start == T0:
                raise ValueError("Code: 6. DB::Exception: cannot parse")
            await store.insert_alert(alert)

    engine = AlertEngine(AlertRules(rules=[rule]), AlertSettings(), TumblingWindows(10), FirstWindowRefused())  # type: ignore[arg-type]
    closer = WindowCloser(
        WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000), store, engine
    )
    rows = [at("a", 1, 0.1), at("b", 2, 0.2), at("c", 11, 0.9), at("d", 12, 0.9)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    await closer.touch(rows)  # type: ignore[arg-type]
    assert await closer.close_due(final=True) == [] and store.alerts_sync() == []
    assert closer.pending() == [("a", "m", T0), ("a", "m", T0 + timedelta(seconds=10))]
    assert closer.failed == 1  # the first window; the second was not tried
    refusing = False
    closed = await closer.close_due(final=True)
    assert [w.window_start for w in closed] == [T0, T0 + timedelta(seconds=10)]
    made = sorted(store.alerts_sync(), key=lambda a: a.window_end)
    assert [(a.state, a.window_start) for a in made] == [
        ("firing", T0),
        ("resolved", T0 + timedelta(seconds=10)),
    ]
    await engine.aclose()


async def one_window_alerting_through(
    store: ClickHouseStore, publish: Callable[[Alert, str], Awaitable[None]]
) -> tuple[AlertEngine, WindowCloser]:
    """A closer with at most 2 close attempts and the window ``T0`` due (two rows stored and touched),
    whose alert rule fires on it and is published through ``publish``."""
    rule = AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=1, min_interactions=2,
                     cooldown_seconds=0)  # fmt: skip
    engine = AlertEngine(AlertRules(rules=[rule]), AlertSettings(), TumblingWindows(10), store, publish)
    closer = WindowCloser(
        WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000, max_close_attempts=2),
        store, engine, clock=ManualClock(T0 + timedelta(hours=1)),
    )  # fmt: skip
    rows = [at("a", 1, 0.1), at("b", 2, 0.2)]
    await store.insert_evaluations(rows)  # type: ignore[arg-type]
    await closer.touch(rows)  # type: ignore[arg-type]
    return engine, closer


async def test_a_window_whose_alert_rules_keep_failing_still_gets_its_aggregate(
    store: ClickHouseStore,
) -> None:
    """Publishing the window's alert is refused every time (a message the broker will never take): after
    ``max_close_attempts`` the window is given up, but its aggregate is written (the dashboard and the
    later windows' rules see no gap) and no transition is stored for it."""
    from aiokafka.errors import MessageSizeTooLargeError

    async def publish(alert: Alert, key: str) -> None:
        raise MessageSizeTooLargeError("the broker refuses the alert")

    engine, closer = await one_window_alerting_through(store, publish)
    assert await closer.close_due(final=True) == [] and store.windows_sync() == []  # retried first
    assert closer.pending() == [("a", "m", T0)]
    closed = await closer.close_due(final=True)
    assert [w.window_start for w in closed] == [T0] and closer.pending() == [] and closer.dropped == 1
    assert [(w.window_start.replace(tzinfo=UTC), w.count) for w in store.windows_sync()] == [(T0, 2)]
    assert store.alerts_sync() == []
    await engine.aclose()


@pytest.mark.parametrize("error", ["KafkaTimeoutError", "KafkaConnectionError", "RequestTimedOutError",
                                   "NodeNotReadyError"])  # fmt: skip
async def test_a_broker_that_cannot_be_reached_is_an_outage_not_a_failed_window(
    store: ClickHouseStore, error: str
) -> None:
    """The alert cannot be published because the broker does not answer: the window stays pending,
    not counted against ``max_close_attempts``, however many rounds it takes; once the broker is back
    its rules run and its aggregate is written."""
    import aiokafka.errors

    broker_up = False
    published: list[Alert] = []

    async def publish(alert: Alert, key: str) -> None:
        if not broker_up:
            raise getattr(aiokafka.errors, error)()
        published.append(alert)

    engine, closer = await one_window_alerting_through(store, publish)
    for _ in range(3):
        assert await closer.close_due(final=True) == []
    assert closer.pending() == [("a", "m", T0)] and closer.failures == {} and closer.dropped == 0
    assert store.windows_sync() == [] and store.alerts_sync() == []
    broker_up = True
    assert [w.window_start for w in await closer.close_due(final=True)] == [T0]
    assert len(published) == 1 and len(store.alerts_sync()) == 1 and len(store.windows_sync()) == 1
    await engine.aclose()
