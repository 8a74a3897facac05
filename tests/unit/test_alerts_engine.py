"""Two alert engines (standing in for two workers) over one chDB store: one transition each way, one
notification per transition and receiver, a failing receiver recorded and counted."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.clock import ManualClock
from schemas.alert import Alert, AlertRules, BaselineRule, Receiver
from schemas.errors import ConfigError
from schemas.window import WindowAggregate
from streams.alerts.engine import AlertEngine
from streams.alerts.receivers import resolve
from streams.clickhouse.leases import Claim, DeliveryLedger
from streams.clickhouse.store import ClickHouseStore
from streams.windows.tumbling import TumblingWindows
from tests.fixtures import messages
from tests.fixtures.receivers import Hook
from tests.fixtures.store import store_settings
from tests.settings_factory import make_settings

HOUR = timedelta(hours=1)
# on a window boundary; the stores keep their rows (no TTL counting from fired_at and computed_at)
T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def deliveries(store: ClickHouseStore) -> list[dict[str, Any]]:
    """Every claim and outcome in the store's delivery ledger."""
    return DeliveryLedger(store).deliveries_sync()


def window(i: int, n: int, bad: int) -> WindowAggregate:
    return messages.window(
        T0 + i * HOUR, count=n, mean_context_entailment=0.8, context_scored=n, answered=n,
        hallucinations=bad, hallucination_rate=bad / n, answer_refusal_rate=0.0, answer_refusal_known=n,
    )  # fmt: skip


RULES = AlertRules(
    rules=[
        BaselineRule(
            name="drift", kind="baseline", metric="hallucination_rate", baseline_windows=6, windows=1,
            confidence=0.99,
            min_interactions=50, min_baseline_interactions=100, for_windows=2, resolve_for=2,
            cooldown_seconds=0,
        )
    ]
)  # fmt: skip


def engines(store: ClickHouseStore, rules: AlertRules, url: str, clock: ManualClock) -> list[AlertEngine]:
    settings = make_settings().alerts
    receivers = [Receiver(name="signed", kind="webhook", url=url, secret="s3cret", retries=2, backoff_s=0)]
    targets = resolve(receivers, settings, env={})
    return [
        AlertEngine(rules, settings, TumblingWindows(3600), store, targets=targets, clock=clock,
                    claimant=f"worker-{k}")
        for k in range(2)
    ]  # fmt: skip


async def run(
    store: ClickHouseStore, engines_: list[AlertEngine], rates: list[int], clock: ManualClock
) -> list[Any]:
    """The distinct transitions made (two engines deciding at once may both make the same one: the same
    alert_id, one row; the ledger still sends it once)."""
    made: dict[str, Any] = {}
    for i, bad in enumerate(rates):
        w = window(i, 100, bad)
        clock.set(w.window_end)
        await store.insert_window(w, clock.now())
        # both workers close the same window at the same time
        for out in await asyncio.gather(*(engine.on_window(w) for engine in engines_)):
            made |= {a.alert_id: a for a in out}
        for engine in engines_:
            await engine.drain()
    return list(made.values())


async def test_drift_fires_once_and_resolves_once_across_two_engines(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    url, state = hook
    clock = ManualClock(T0)
    pair = engines(store, RULES, url, clock)
    # 8 windows at 5 %, 4 at 20 % (drift), 4 back at 5 %
    made = await run(store, pair, [5] * 8 + [20] * 4 + [5] * 4, clock)
    states = [(a.state, a.window_end - T0) for a in made]
    assert states == [("firing", 10 * HOUR), ("resolved", 14 * HOUR)]  # for: 2 windows; resolve_for: 2
    fired, back = made
    assert fired.baseline == pytest.approx(0.05) and fired.value == pytest.approx(0.20)
    assert back.baseline == pytest.approx(0.05) and back.ends_at == T0 + 14 * HOUR
    assert back.starts_at == fired.starts_at == T0 + 10 * HOUR and back.incident_id == fired.alert_id
    assert [a.state for a in store.alerts_sync()] == ["firing", "resolved"]
    # one signed post per transition, though two engines evaluated every window
    assert len(state.posts) == 2
    for headers, body in state.posts:
        mac = hmac.new(b"s3cret", headers["X-Groundwatch-Timestamp"].encode() + b"." + body, hashlib.sha256)
        assert headers["X-Groundwatch-Signature"] == "sha256=" + mac.hexdigest()
    assert [json.loads(b)["alert"]["state"] for _, b in state.posts] == ["firing", "resolved"]
    assert [d["status"] for d in deliveries(store)].count("delivered") == 2
    assert sum(e.delivered for e in pair) == 2 and sum(e.delivery_failures for e in pair) == 0


async def test_the_ledger_lets_one_of_two_claims_send(store: ClickHouseStore, hook: tuple[str, Hook]) -> None:
    url, state = hook
    clock = ManualClock(T0)
    pair = engines(store, RULES, url, clock)
    made = await run(store, pair[:1], [5] * 8 + [20] * 2, clock)
    state.posts.clear()
    # both workers decided the same transition before either stored it: both try to notify
    sent = await asyncio.gather(*(e.notify(e.targets[0], made[0]) for e in pair))
    assert sent == [False, False] and state.posts == []  # delivered already (by run()): never again
    fresh = made[0].model_copy(update={"alert_id": "other|bot|m|x"})
    sent = await asyncio.gather(*(e.notify(e.targets[0], fresh) for e in pair))
    assert sorted(sent) == [False, True] and len(state.posts) == 1
    rows = [d for d in deliveries(store) if d["alert_id"] == "other|bot|m|x"]
    assert sorted(d["status"] for d in rows) == ["claimed", "delivered"]


async def test_a_failing_receiver_is_retried_then_recorded_and_counted(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    url, state = hook
    state.codes = [503] * 10
    clock = ManualClock(T0)
    pair = engines(store, RULES, url, clock)
    made = await run(store, pair, [5] * 8 + [20] * 2, clock)
    assert [a.state for a in made] == ["firing"]
    assert len(state.posts) == 3  # 1 + 2 retries, by one engine only
    failed = [d for d in deliveries(store) if d["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["attempts"] == 3 and "503" in failed[0]["error"]
    assert sum(e.delivery_failures for e in pair) == 1


async def test_stable_rate_never_fires(store: ClickHouseStore, hook: tuple[str, Hook]) -> None:
    url, state = hook
    clock = ManualClock(T0)
    made = await run(store, engines(store, RULES, url, clock), [5, 6, 4, 5, 7, 5, 4, 6, 5, 6, 5, 4], clock)
    assert made == [] and state.posts == []


async def test_a_worker_that_stopped_mid_delivery_leaves_it_to_another(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    """Worker 0 stored two transitions and stopped: one after claiming its notification, one before.
    While the claim is live nobody else sends; once it is older than the lease, worker 1 sends both,
    each once, however often it looks."""
    url, state = hook
    clock = ManualClock(T0)
    crashed, survivor = engines(store, RULES, url, clock)
    made = await run(store, [], [5] * 8 + [20] * 2, clock)  # the windows only
    fired = await crashed.evaluate(RULES.rules[0], window(9, 100, 20))
    assert fired is not None and made == []
    other = fired.model_copy(update={"alert_id": "drift|bot|m|other"})
    for alert in (fired, other):
        await store.insert_alert(alert)
    delivery = f"{fired.alert_id}|signed"
    assert await DeliveryLedger(store).claim(
        Claim(delivery, fired.alert_id, "signed", clock.now()), crashed.deliveries.claimant
    )
    # the claim is live: only the transition nobody claimed is sent
    assert await survivor.redeliver() == 1
    await survivor.drain()
    assert [json.loads(b)["alert"]["alert_id"] for _, b in state.posts] == [other.alert_id]
    assert await survivor.redeliver() == 0  # recorded as delivered
    clock.advance(make_settings().alerts.delivery_lease_s + 1)
    assert await survivor.redeliver() == 1
    await survivor.drain()
    assert await survivor.redeliver() == 0
    assert [json.loads(b)["alert"]["alert_id"] for _, b in state.posts] == [other.alert_id, fired.alert_id]
    outcomes = {(d["delivery_id"], d["claimant"]): d["status"] for d in deliveries(store)}
    assert (
        outcomes[(delivery, crashed.deliveries.claimant)] == "claimed"
    )  # the stopped worker's claim stays as it was
    assert outcomes[(delivery, survivor.deliveries.claimant)] == "delivered"


async def test_a_long_firing_alert_is_posted_to_alertmanager_again_before_its_ends_at(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    """Alertmanager resolves an alert at its endsAt: while the drift lasts, each window re-posts the
    firing alert (every quarter of firing_ttl_hours) with endsAt moved forward; one fired transition."""
    url, state = hook
    clock = ManualClock(T0)
    receivers = [Receiver(name="am", kind="alertmanager", url=url, retries=0, firing_ttl_hours=2)]
    targets = resolve(receivers, make_settings().alerts, env={})
    engine = AlertEngine(RULES, make_settings().alerts, TumblingWindows(3600), store, targets=targets,
                         clock=clock, claimant="w")  # fmt: skip
    engine.deliveries._refreshed["resolved long ago"] = T0 - timedelta(days=1)
    made = await run(store, [engine], [5] * 8 + [20] * 5, clock)
    assert [a.state for a in made] == ["firing"]
    # a refresh older than its period is forgotten
    assert list(engine.deliveries._refreshed) == [made[0].alert_id]
    posts = [json.loads(body)[0] for _, body in state.posts]
    assert len(posts) == 4  # the firing, then one refresh a window (hourly > 2 h / 4)
    ends = [datetime.fromisoformat(p["endsAt"].replace("Z", "+00:00")) for p in posts]
    assert ends == sorted(ends) and len(set(ends)) == 4
    assert all(e - clock.now() <= timedelta(hours=2) for e in ends)
    assert {p["labels"]["alertname"] for p in posts} == {"drift"}
    assert {p["startsAt"] for p in posts} == {posts[0]["startsAt"]}


class Silent:
    """A receiver on 127.0.0.1 that accepts every connection, reads the request and never answers."""

    def __init__(self, expected: int) -> None:
        self.requests = 0
        self.expected = expected
        self.all_in = asyncio.Event()
        self.url = ""
        self._server: asyncio.Server | None = None
        self._held: list[asyncio.StreamWriter] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._held.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        if self.requests >= self.expected:
            self.all_in.set()
        await asyncio.Event().wait()  # never answers

    async def __aenter__(self) -> Silent:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/hook"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        for writer in self._held:
            writer.close()
        self._server.close()


def transition(i: int, fired_at: datetime) -> Alert:
    return Alert(
        alert_id=f"drift|bot|m|{i}", rule="drift", metric="hallucination_rate", app="bot", model="m",
        value=0.2, threshold=0.1, op=">", windows=1, interactions=100, window_start=T0, window_end=T0 + HOUR,
        fired_at=fired_at, message=f"transition {i}",
    )  # fmt: skip


def silent_engine(
    store: ClickHouseStore, url: str, clock: ManualClock, *, grace: float, claimant: str = "stopping"
) -> AlertEngine:
    # attempts that wait an hour, many retries: only the stop (or the delivery timeout) ends them
    receiver = Receiver(
        name="hook", kind="webhook", url=url, retries=5, timeout_s=3600, delivery_timeout_s=500
    )
    targets = resolve([receiver], make_settings().alerts, env={})
    return AlertEngine(RULES, make_settings().alerts, TumblingWindows(3600), store, targets=targets,
                       clock=clock, claimant=claimant, stop_grace_s=grace)  # fmt: skip


def next_worker(store: ClickHouseStore, url: str, clock: ManualClock) -> AlertEngine:
    targets = resolve(
        [Receiver(name="hook", kind="webhook", url=url, retries=0)], make_settings().alerts, env={}
    )
    return AlertEngine(RULES, make_settings().alerts, TumblingWindows(3600), store, targets=targets,
                       clock=clock, claimant="next")  # fmt: skip


async def test_a_stop_cancels_deliveries_a_silent_receiver_holds_and_releases_their_claims(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    """12 deliveries claimed and waiting on a receiver that never answers: the stop returns (no hang
    until their timeouts), their claims are released, and the next worker sends each once, without
    waiting for the lease."""
    clock = ManualClock(T0)
    async with Silent(expected=12) as silent:
        engine = silent_engine(store, silent.url, clock, grace=0.05)
        for i in range(12):
            await engine.deliver(transition(i, clock.now()))
        await asyncio.wait_for(silent.all_in.wait(), 60)  # every delivery claimed and its request sent
        assert {d["status"] for d in deliveries(store)} == {"claimed"}
        await asyncio.wait_for(engine.aclose(), 60)  # a guard against a hang, not a measure of time
    rows = deliveries(store)
    assert len(rows) == 12 and {d["status"] for d in rows} == {"released"}
    assert engine.delivered == engine.delivery_failures == 0
    url, state = hook
    successor = next_worker(store, url, clock)  # same clock: the lease has not run out
    assert await successor.redeliver() == 12
    await successor.drain()
    assert sorted(json.loads(b)["alert"]["alert_id"] for _, b in state.posts) == sorted(
        f"drift|bot|m|{i}" for i in range(12)
    )
    assert await successor.redeliver() == 0
    outcome = {(d["delivery_id"], d["claimant"]): d["status"] for d in deliveries(store)}
    assert set(outcome.values()) == {"released", "delivered"}
    assert sum(1 for (_, who), s in outcome.items() if who == "next" and s == "delivered") == 12
    await successor.aclose()


async def test_a_stop_without_grace_leaves_no_delivery_claimed(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    """Cancelled in any phase (not started, claiming, sending): nothing stays claimed."""
    clock = ManualClock(T0)
    async with Silent(expected=1) as silent:
        engine = silent_engine(store, silent.url, clock, grace=0)
        for i in range(3):
            await engine.deliver(transition(i, clock.now()))
        await asyncio.wait_for(engine.aclose(), 60)
    assert {d["status"] for d in deliveries(store)} <= {"released"}
    url, state = hook
    successor = next_worker(store, url, clock)
    assert await successor.redeliver() == 3
    await successor.aclose()  # its grace is long enough for a receiver that answers
    assert len(state.posts) == 3


async def test_a_delivery_ends_within_its_own_timeout_and_is_recorded_failed(store: ClickHouseStore) -> None:
    clock = ManualClock(T0)
    async with Silent(expected=1) as silent:
        receiver = Receiver(name="hook", kind="webhook", url=silent.url, retries=50, timeout_s=3600,
                            delivery_timeout_s=0.2)  # fmt: skip
        targets = resolve([receiver], make_settings().alerts, env={})
        engine = AlertEngine(RULES, make_settings().alerts, TumblingWindows(3600), store, targets=targets,
                             clock=clock, claimant="w")  # fmt: skip
        alert = transition(0, clock.now())
        await store.insert_alert(alert)
        assert await asyncio.wait_for(engine.notify(targets[0], alert), 60) is False
        await engine.aclose()
    [row] = deliveries(store)
    assert row["status"] == "failed" and row["attempts"] == 1 and "0.2 s deadline" in row["error"]
    assert engine.delivery_failures == 1


def test_a_delivery_timeout_must_be_positive_and_below_the_lease() -> None:
    with pytest.raises(ValidationError, match="delivery_timeout_s"):
        Receiver(name="r", kind="webhook", url="http://127.0.0.1:9/", delivery_timeout_s=0)
    settings = make_settings(alerts={"delivery_lease_s": 60}).alerts
    with pytest.raises(ConfigError, match=r"delivery_timeout_s=60 must be below alerts\.delivery_lease_s=60"):
        resolve([Receiver(name="r", kind="webhook", url="http://127.0.0.1:9/")], settings, env={})
    assert resolve([Receiver(name="r", kind="webhook", url="u", delivery_timeout_s=59)], settings, env={})


@pytest.mark.parametrize("batch", [1, 3, 40])
async def test_windows_closed_together_make_the_transitions_one_by_one_would(batch: int) -> None:
    """``on_windows`` (a batch of closes) against ``on_window`` for each window in turn, on a threshold
    rule that flaps and a baseline rule: the same transitions, each once; a batch evaluated again (a
    retry after a failure) makes none twice."""
    from schemas.alert import AlertRule

    rules = AlertRules(
        rules=[
            AlertRule(name="flap", metric="hallucination_rate", threshold=0.5, windows=2, min_interactions=10,
                      cooldown_seconds=0),
            *RULES.rules,
        ]
    )  # fmt: skip
    rates = [5, 5, 5, 5, 5, 5, 5, 90, 90, 90, 5, 5, 5, 80, 5, 90, 90, 5, 5, 5] * 2
    windows = [window(i, 100, bad) for i, bad in enumerate(rates)]
    made: dict[str, list[tuple[str, str, datetime]]] = {}
    for way in ("one by one", "together"):
        s = ClickHouseStore.open_sync(store_settings())
        clock = ManualClock(T0)
        published: list[Alert] = []

        async def publish(alert: Alert, key: str, published: list[Alert] = published) -> None:
            published.append(alert)

        engine = AlertEngine(rules, make_settings().alerts, TumblingWindows(3600), s, publish, clock=clock)
        for i in range(0, len(windows), batch):
            part = windows[i : i + batch]
            clock.set(part[-1].window_end)
            await s.insert_windows(part, clock.now())
            if way == "together":
                await engine.on_windows(part)
                assert await engine.on_windows(part) == []  # evaluated again: nothing twice
            else:
                for w in part:
                    await engine.on_window(w)
        made[way] = [(a.alert_id, a.state, a.window_end) for a in published]
        assert len({a for a, *_ in made[way]}) == len(made[way]) == len(s.alerts_sync())
        await engine.aclose()
        s.close()
    assert sorted(made["together"]) == sorted(made["one by one"])  # (rules apart: in another order)
    assert {state for _, state, _ in made["together"]} == {"firing", "resolved"}


def firing_at(i: int, fired_at: datetime) -> Alert:
    """The rule's firing at window ``i``, as a worker that saw the drift breach first there decides it."""
    start = T0 + i * HOUR
    return Alert(
        alert_id=f"drift|bot|m|{start:%Y-%m-%dT%H:%M:%S}", rule="drift", metric="hallucination_rate",
        app="bot", model="m", value=0.2, threshold=0.1, op=">", windows=1, interactions=100,
        window_start=start, window_end=start + HOUR, fired_at=fired_at, message=f"firing at {i}",
        state="firing", starts_at=start + HOUR,
    )  # fmt: skip


async def test_a_new_owner_carries_on_the_incident_its_last_owner_opened(
    store: ClickHouseStore, hook: tuple[str, Hook]
) -> None:
    """Ownership of a series moved while its drift lasted: the last owner fired at window 9; the new
    owner, finding the breach at window 10, makes no second firing; once resolved, the next drift opens
    a new incident. The ledger holds notification deliveries only (no claims of incident openings)."""
    url, state = hook
    clock = ManualClock(T0 + 11 * HOUR)
    last_owner, new_owner = engines(store, RULES, url, clock)
    made = firing_at(9, clock.now())
    assert await last_owner.opens(made)
    await last_owner.deliver(made)
    await last_owner.drain()
    assert not await new_owner.opens(firing_at(10, clock.now()))  # the incident is open: stored
    assert [a.alert_id for a in store.alerts_sync()] == [made.alert_id] and len(state.posts) == 1
    back = made.model_copy(update={"alert_id": f"{made.alert_id}|resolved", "state": "resolved",
                                   "window_end": T0 + 14 * HOUR})  # fmt: skip
    assert await new_owner.opens(back)
    await new_owner.deliver(back)
    await new_owner.drain()
    assert await new_owner.opens(firing_at(20, clock.now()))
    receivers = {d["receiver"] for d in DeliveryLedger(store).deliveries_sync()}
    assert receivers and all(not r.startswith("(") for r in receivers)


async def test_a_transition_another_worker_stores_between_the_reads_carries_on_to_the_next_window(
    store: ClickHouseStore,
) -> None:
    """Two windows in breach closed together. Another worker stores the first window's firing after this
    engine's first read of the rule's state: the rule's later windows continue that firing instead of
    firing a second alert (the first window's may be made again: the same id, one row)."""
    from schemas.alert import AlertRule

    rules = AlertRules(rules=[AlertRule(name="h", metric="hallucination_rate", threshold=0.5, windows=1,
                                        min_interactions=10, cooldown_seconds=0)])  # fmt: skip
    first, second = window(0, 100, 90), window(1, 100, 90)
    clock = ManualClock(second.window_end)
    other = AlertEngine(rules, make_settings().alerts, TumblingWindows(3600), store, clock=clock)

    class OtherWorkerMeanwhile:
        """The store; right after the first read of the rule's state, the other worker closes the first
        window."""

        read = False

        def __getattr__(self, name: str) -> object:
            found = getattr(store, name)
            if name not in ("latest_alert", "last_alert_end", "alert_windows", "alert_ids_since"):
                return found

            async def read(*args: Any, **kwargs: Any) -> Any:
                out = await found(*args, **kwargs)
                if not self.read:
                    self.read = True
                    assert [a.state for a in await other.on_windows([first])] == ["firing"]
                return out

            return read

    engine = AlertEngine(
        rules, make_settings().alerts, TumblingWindows(3600), OtherWorkerMeanwhile(), clock=clock
    )  # type: ignore[arg-type]
    made = await engine.on_windows([first, second])
    assert {a.window_start for a in made} <= {first.window_start}
    assert [(a.state, a.window_start) for a in store.alerts_sync()] == [("firing", first.window_start)]
    await engine.aclose()
    await other.aclose()


async def test_a_notification_whose_claim_could_not_be_written_is_sent_by_the_same_worker_later(
    store: ClickHouseStore, hook: tuple[str, Hook], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ClickHouse refused the delivery's claim (an outage at the moment of the transition): nothing was
    sent, the failure is logged; the worker's next look for unrecorded notifications sends it, once."""
    url, state = hook
    clock = ManualClock(T0 + 11 * HOUR)
    engine, _ = engines(store, RULES, url, clock)
    real = store.insert_rows
    refused: list[str] = []

    async def insert_rows(table: str, rows: Any, columns: Any) -> None:
        if table.endswith("alert_deliveries") and not refused:
            refused.append(table)
            raise ConnectionError("ClickHouse is down")
        await real(table, rows, columns)

    monkeypatch.setattr(store, "insert_rows", insert_rows)
    fired = firing_at(9, clock.now())
    await engine.deliver(fired)
    await engine.drain()
    assert refused and state.posts == []
    assert await engine.redeliver() == 1
    await engine.drain()
    assert [json.loads(b)["alert"]["alert_id"] for _, b in state.posts] == [fired.alert_id]
    assert await engine.redeliver() == 0  # recorded as delivered
