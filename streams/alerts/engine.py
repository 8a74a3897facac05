"""Evaluates the alert rules on each closed window and delivers the transitions (firing, resolved):
alerts topic, ``alerts`` table, one notification per receiver.

Per rule and app/model: read the rule's latest transition (``alerts``) and the recent windows
(``window_aggregates``), and let ``streams.alerts.lifecycle.decide`` say whether to fire or resolve.
Transition ids are deterministic, so every worker closing the same window decides the same transition:
the topic gets it at least once (keyed by alert_id; consumers dedupe on it), the table once (a
ReplacingMergeTree keyed by alert_id).

Order: the topic first, then the table (what the next evaluation reads), then the receivers in the
background. A failed publish raises before the table row exists, so the window stays due, unwritten
(streams.windows.closer: a window is written once its rules were evaluated), and the transition is
retried, by this worker or, after a stop, by the next start.

Incidents: one worker evaluates a series' rules, the owner of its windows (``streams.ownership``: the
partition of the touches topic its (app, model) keys to), so each drift is decided once, on the windows
as stored. While ownership moves (a rebalance, a worker killed), the new owner reads the series' latest
transition before it fires: an incident the last owner opened is carried on, not opened again.

Notifications, however many workers: before sending, a worker claims the delivery (alert id + receiver)
in the ``alert_deliveries`` ledger; only the earliest claim sends (``streams.clickhouse.leases``),
with retries and backoff, and records the outcome there. A delivery that fails every retry is logged as
an ERROR, counted (``delivery_failures``) and kept in the ledger with its last error. Requests carry
the delivery id (``X-Groundwatch-Delivery``) and Alertmanager merges posts of the same labels, so the
rare double send of two claims racing within one round trip is still one notification at those
receivers (docs/alerts.md).

Every delivery ends within its receiver's ``delivery_timeout_s``. At a stop (``aclose``) the deliveries
in flight get ``stop_grace_s`` (a third of ``kafka.shutdown_timeout_s``) to finish; the rest are
cancelled and their claims released, so the next worker sends them at once instead of after the lease.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime, timedelta
from typing import Any

import httpx

from pipeline.clock import Clock, SystemClock
from schemas.alert import Alert, AlertRules
from schemas.settings import AlertSettings, Settings
from schemas.utc import utc
from schemas.window import WindowAggregate
from streams.alerts.judge_drift import JudgeDrift
from streams.alerts.lifecycle import Rule, Slot, decide, history_needed
from streams.alerts.receivers import Target, resolve
from streams.alerts.rules import RuleEvaluator, load_rules
from streams.alerts.slices import slice_observations
from streams.alerts.stats import EMPTY, observe
from streams.alerts.webhook import Outcome
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.leases import Claim, DeliveryLedger
from streams.clickhouse.store import ClickHouseStore
from streams.judge_quality import correct_threshold
from streams.windows.tumbling import TumblingWindows

log = logging.getLogger(__name__)

Publish = Callable[[Alert, str], Awaitable[None]]


def _log_failure(task: asyncio.Task[bool]) -> None:
    """Done-callback of a delivery task: an exception (a bug or a ledger outage) is logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.error("alert delivery crashed", exc_info=task.exception())


def _order(alert: Alert) -> tuple[datetime, bool]:
    """How ``ClickHouseStore.latest_alert`` orders a rule's transitions (the greatest is the latest)."""
    return alert.window_end, alert.state == "resolved"


class AlertEngine:
    def __init__(
        self,
        rules: AlertRules,
        settings: AlertSettings,
        windows: TumblingWindows,
        store: ClickHouseStore,
        publish: Publish | None = None,
        *,
        targets: list[Target] | None = None,
        clock: Clock | None = None,
        claimant: str | None = None,
        stop_grace_s: float = 10.0,
        drift: JudgeDrift | None = None,
    ) -> None:
        self.evaluator = RuleEvaluator(rules)
        self.settings = settings
        self.windows = windows
        self.store = store
        self.ledger = DeliveryLedger(store)  # who sends each notification
        self.publish = publish
        self.targets = resolve(rules.receivers, settings) if targets is None else targets
        self.clock: Clock = clock or SystemClock()  # stamps transitions, leases, deliveries; their backoff
        self.claimant = claimant or uuid.uuid4().hex  # this engine's name in the delivery ledger
        self.stop_grace_s = stop_grace_s  # how long a stop waits for deliveries in flight (aclose)
        # rules on the judge's agreement with people's labels (streams.alerts.judge_drift)
        # (by default with the default settings: no environment read here)
        self.drift = drift or JudgeDrift(
            LabelStore(store).latest_labeled, correct_threshold(Settings.model_construct())
        )
        self.fired = 0  # transitions made (firing and resolved)
        self.delivered = 0
        self.delivery_failures = 0
        self._http: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[bool]] = set()
        self._last_redeliver: datetime | None = None
        self._sending: set[str] = set()  # delivery ids this engine is sending now (never two at once)
        # firing alert id -> when Alertmanager last heard of it, oldest first, within the last refresh period
        self._refreshed: dict[str, datetime] = {}
        self._unsent: list[Claim] = []  # cancelled by the stop before an outcome: released by aclose
        self._unrecorded: list[tuple[str, Outcome]] = []  # cancelled by the stop while recording it

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        store: ClickHouseStore,
        publish: Publish | None,
        *,
        clock: Clock | None = None,
    ) -> AlertEngine:
        path = settings.alerts.rules_file
        rules = load_rules(path) if path is not None else AlertRules(rules=[])
        windows = TumblingWindows(settings.window.size_seconds)
        grace = settings.kafka.shutdown_timeout_s / 3  # the rest of the stop has the other two thirds
        drift = JudgeDrift(
            LabelStore(store).latest_labeled, correct_threshold(settings),
            include_end_user=settings.labels.include_end_user, resamples=settings.labels.bootstrap_resamples,
        )  # fmt: skip
        return cls(
            rules, settings.alerts, windows, store, publish, clock=clock, stop_grace_s=grace, drift=drift
        )

    async def slots(self, rule: Rule, window: WindowAggregate) -> list[Slot]:
        """The windows ``decide`` reads for this rule, ending with ``window`` (empty slots included)."""
        n = history_needed(rule)
        start, _ = self.windows.last_k(window.window_start, n)
        stored = await self.store.alert_windows(window.app, window.model, start, window.window_start)
        by_start = {utc(w.window_start): w for w in stored}
        size = timedelta(seconds=self.windows.size_seconds)
        out = []
        for i in range(n):
            s = start + i * size
            w = window if i == n - 1 else by_start.get(s)
            out.append(Slot(s, s + size, observe(rule.metric, w) if w is not None else EMPTY))
        return out

    async def evaluate(self, rule: Rule, window: WindowAggregate) -> Alert | None:
        """The transition this window makes for one rule (None: none, or already made)."""
        latest = await self.store.latest_alert(rule.name, window.app, window.model)
        if latest is not None and window.window_end < latest.window_end:
            return None  # an older window closed again after a later transition: history stands
        open_alert = latest if latest is not None and latest.state == "firing" else None
        last_fired = await self.store.last_alert_end(rule.name, window.app, window.model)
        if rule.judge_metric:
            size = timedelta(seconds=self.windows.size_seconds)
            alert = await self.drift.decide(
                rule,
                window.app,
                window.model,
                window.window_end,
                size,
                open_alert,
                last_fired,
                self.clock.now(),
            )
        else:
            slots = await self.slots(rule, window)
            alert = decide(rule, window.app, window.model, slots, open_alert, last_fired, self.clock.now())
        if alert is None or await self.store.alert_exists(alert.alert_id):
            return None
        return alert

    async def sliced(self, rule: Rule, window: WindowAggregate) -> list[Alert]:
        """The transitions this window makes for a rule with group_by, one lifecycle per slice
        (streams/alerts/slices.py)."""
        n = history_needed(rule)
        start, _ = self.windows.last_k(window.window_start, n)
        size = self.windows.size_seconds
        observed = await slice_observations(
            self.store, rule, window.app, window.model, start, window.window_end, size
        )
        made = []
        for name, by_start in sorted(observed.items()):
            slots = [
                Slot(s, s + timedelta(seconds=size), by_start.get(s, EMPTY))
                for s in (start + timedelta(seconds=size * i) for i in range(n))
            ]
            latest = await self.store.latest_alert(rule.name, window.app, window.model, name)
            if latest is not None and window.window_end < latest.window_end:
                continue
            open_alert = latest if latest is not None and latest.state == "firing" else None
            last_fired = await self.store.last_alert_end(rule.name, window.app, window.model, name)
            alert = decide(
                rule, window.app, window.model, slots, open_alert, last_fired, self.clock.now(), name
            )
            if (
                alert is not None
                and not await self.store.alert_exists(alert.alert_id)
                and await self.opens(alert)
            ):
                await self.deliver(alert)
                made.append(alert)
        return made

    async def on_window(self, window: WindowAggregate) -> list[Alert]:
        await self.redeliver_due()
        made = []
        for rule in self.evaluator.rules_for(window.app, window.model):
            if rule.group_by:
                made += await self.sliced(rule, window)
                continue
            made += await self._one(rule, window)
        return made

    async def on_windows(self, windows: Sequence[WindowAggregate]) -> list[Alert]:
        """Windows closed together (written once their rules are evaluated: the windows before them are
        stored), each once and in order of time: the transitions
        ``on_window`` would make for each in turn. A plain rule's state (its latest transition, when it
        last fired, the stored windows before, the transitions already made) is read once per app and
        model and carried from window to window; rules with group_by or on the judge's agreement go
        through ``on_window``'s path per window. Raises at the first failure: the transitions made
        before it are stored, so evaluating the windows again makes none of them twice."""
        await self.redeliver_due()
        made: list[Alert] = []
        series: dict[tuple[str, str], list[WindowAggregate]] = {}
        for window in sorted(windows, key=lambda w: w.window_start):
            series.setdefault((window.app, window.model), []).append(window)
        for (app, model), run in series.items():
            for rule in self.evaluator.rules_for(app, model):
                if rule.group_by or rule.judge_metric:
                    for window in run:
                        one = self.sliced(rule, window) if rule.group_by else self._one(rule, window)
                        made += await one
                    continue
                made += await self._run(rule, app, model, run)
        return made

    async def _one(self, rule: Rule, window: WindowAggregate) -> list[Alert]:
        alert = await self.evaluate(rule, window)
        if alert is None or not await self.opens(alert):
            await self.refresh_firing(rule, window)
            return []
        await self.deliver(alert)
        return [alert]

    async def _run(self, rule: Rule, app: str, model: str, run: list[WindowAggregate]) -> list[Alert]:
        """One plain rule over consecutive closes of one app/model (``on_windows``). The rule's latest
        transition is read last: one another worker stores meanwhile is then in it (an open alert is
        carried on, not fired again on a later window), or in none of the reads (the same transition made
        again: the same id)."""
        last_fired = await self.store.last_alert_end(rule.name, app, model)
        n = history_needed(rule)
        start, _ = self.windows.last_k(run[0].window_start, n)
        stored = await self.store.alert_windows(app, model, start, run[-1].window_start)
        by_start = {utc(w.window_start): w for w in stored} | {utc(w.window_start): w for w in run}
        made_ids = set(await self.store.alert_ids_since(rule.name, app, model, start))
        latest = await self.store.latest_alert(rule.name, app, model)
        if (
            latest is not None
            and latest.state == "firing"
            and (last_fired is None or latest.window_end > last_fired)
        ):
            last_fired = latest.window_end
        size = timedelta(seconds=self.windows.size_seconds)
        made = []
        for window in run:
            if latest is not None and window.window_end < latest.window_end:
                # an older window closed again after a later transition: history stands
                await self.refresh_firing(rule, window)
                continue
            first, _ = self.windows.last_k(window.window_start, n)
            slots = []
            for i in range(n):
                s = first + i * size
                w = window if i == n - 1 else by_start.get(s)
                slots.append(Slot(s, s + size, observe(rule.metric, w) if w is not None else EMPTY))
            open_alert = latest if latest is not None and latest.state == "firing" else None
            alert = decide(rule, app, model, slots, open_alert, last_fired, self.clock.now())
            if alert is None or (alert.alert_id not in made_ids and not await self.opens(alert)):
                await self.refresh_firing(rule, window)
                continue
            if alert.alert_id in made_ids:
                # made already (before this run, or by another worker during its reads): it stands, and the
                # windows after this one go on from it
                await self.refresh_firing(rule, window)
            else:
                await self.deliver(alert)
                made_ids.add(alert.alert_id)
                made.append(alert)
            if latest is None or _order(alert) >= _order(latest):
                latest = alert
            if alert.state == "firing" and (last_fired is None or alert.window_end > last_fired):
                last_fired = alert.window_end
        return made

    async def opens(self, alert: Alert) -> bool:
        """Whether this engine makes the transition ``alert``: a resolution, always (its id is its
        incident's, the same whoever resolves it); a firing, when no incident of its series is open. One
        worker owns a series' windows (``streams.ownership``), so this read only matters while ownership
        moves: a firing the last owner stored after this window's evaluation read is carried on."""
        if alert.state != "firing":
            return True
        latest = await self.store.latest_alert(alert.rule, alert.app, alert.model, alert.slice)
        return latest is None or latest.state != "firing"

    async def refresh_firing(self, rule: Rule, window: WindowAggregate) -> bool:
        """Post a still-firing alert to the Alertmanager receivers again, every quarter of their
        ``firing_ttl_hours``, moving its endsAt forward, so Alertmanager never resolves an incident
        groundwatch still has open (as Prometheus re-sends its active alerts). Alertmanager merges the
        posts into one alert: no new notification. Not recorded in the ledger."""
        targets = [t for t in self.targets if t.receiver.kind == "alertmanager"]
        if not targets:
            return False
        latest = await self.store.latest_alert(rule.name, window.app, window.model)
        if latest is None or latest.state != "firing":
            return False
        now = self.clock.now()
        every = timedelta(hours=min(t.receiver.firing_ttl_hours for t in targets)) / 4
        last = self._refreshed.get(latest.alert_id)
        if last is not None and now - last < every:
            return False
        self._refreshed.pop(latest.alert_id, None)
        self._refreshed[latest.alert_id] = now  # oldest first: a refresh older than ``every`` is done again
        oldest, at = next(iter(self._refreshed.items()))
        while now - at >= every:  # stops at the latest, refreshed now
            del self._refreshed[oldest]
            oldest, at = next(iter(self._refreshed.items()))
        if self._http is None:
            self._http = httpx.AsyncClient()
        for target in targets:
            outcome = await target.send(
                self._http, latest, f"{latest.alert_id}|{target.name}", now, self.clock.sleep
            )
            if not outcome.ok:
                log.warning(
                    "alert %s: refreshing it in %s failed: %s", latest.alert_id, target.name, outcome.error
                )
        return True

    async def deliver(self, alert: Alert) -> None:
        if self.publish is not None:  # first: when it fails, nothing marks the transition as made
            await self.publish(alert, alert.alert_id)
        await self.store.insert_alert(alert)  # then the table (the next evaluation reads it)
        self.fired += 1
        log.warning("ALERT %s", alert.message)
        for target in self.targets:
            self._spawn(self.notify(target, alert))

    async def redeliver_due(self) -> int:
        """Every half lease (and at the first window after start): send the notifications a stopped
        worker claimed or was about to claim and never recorded (``redeliver``)."""
        now = self.clock.now()
        lease = timedelta(seconds=self.settings.delivery_lease_s)
        if self._last_redeliver is not None and now - self._last_redeliver < lease / 2:
            return 0
        self._last_redeliver = now
        return await self.redeliver()

    async def redeliver(self) -> int:
        """Claim and send each transition of the last ``redeliver_hours`` whose notification to a
        receiver has no outcome and no live claim; returns how many were started."""
        if not self.targets:
            return 0
        now = self.clock.now()
        by_name = {t.name: t for t in self.targets}
        since = now - timedelta(hours=self.settings.redeliver_hours)
        stale = now - timedelta(seconds=self.settings.delivery_lease_s)
        pending = await self.ledger.undelivered(list(by_name), since, stale)
        for alert, receiver in pending:
            log.warning("alert %s: notifying %s again (no outcome recorded)", alert.alert_id, receiver)
            self._spawn(self.notify(by_name[receiver], alert))
        return len(pending)

    def _spawn(self, work: Coroutine[Any, Any, bool]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    async def notify(self, target: Target, alert: Alert) -> bool:
        """Claim, send (with retries) and record one delivery; False when another worker sends it or
        it failed (then logged and counted). A claim older than the lease without an outcome does not
        stand in the way (its worker stopped). Cancelled (a stop) before its outcome is known, the
        claim is released: the delivery is left to the next worker. One that raised (the ledger could
        not be written) is sent by the next ``redeliver`` that finds it without an outcome or a live
        claim, by this engine or another."""
        delivery_id = f"{alert.alert_id}|{target.name}"
        if delivery_id in self._sending:
            return False
        self._sending.add(delivery_id)
        try:
            return await self._notify(target, alert, delivery_id)
        finally:
            self._sending.discard(delivery_id)

    async def _notify(self, target: Target, alert: Alert, delivery_id: str) -> bool:
        now = self.clock.now()
        claim = Claim(delivery_id, alert.alert_id, target.name, now)
        outcome: Outcome | None = None
        try:
            # from its first await a claim row may exist: a cancellation does not stop the insert
            stale_before = now - timedelta(seconds=self.settings.delivery_lease_s)
            if not await self.ledger.claim(claim, self.claimant, stale_before):
                log.info("delivery %s is another worker's", delivery_id)
                return False
            if self._http is None:
                self._http = httpx.AsyncClient()
            outcome = await target.send(self._http, alert, delivery_id, self.clock.now(), self.clock.sleep)
            await self._record(delivery_id, outcome)
        except asyncio.CancelledError:  # the stop (aclose) writes what is left to write, in one go
            if outcome is None:
                self._unsent.append(claim)
            else:
                self._unrecorded.append((delivery_id, outcome))
            raise
        if outcome.ok:
            self.delivered += 1
            return True
        self.delivery_failures += 1
        log.error(
            "webhook delivery failed after %d attempts: %s to receiver %s (%s): %s; kept in alert_deliveries",
            outcome.attempts, delivery_id, target.name, target.receiver.kind, outcome.error,
        )  # fmt: skip
        return False

    async def _settle_cancelled(self) -> None:
        unsent, self._unsent = self._unsent, []
        if unsent:
            log.warning(
                "%d alert deliveries cancelled unsent %g s into the stop, their claims released for the "
                "next worker: %s", len(unsent), self.stop_grace_s, ", ".join(c.delivery_id for c in unsent),
            )  # fmt: skip
            await self.ledger.release(unsent, self.claimant, self.clock.now())
        unrecorded, self._unrecorded = self._unrecorded, []
        for delivery_id, outcome in unrecorded:
            await self._record(delivery_id, outcome)

    async def _record(self, delivery_id: str, outcome: Outcome) -> None:
        status = "delivered" if outcome.ok else "failed"
        await self.ledger.finish(
            delivery_id, self.claimant, status, outcome.attempts, outcome.error, self.clock.now()
        )

    async def drain(self) -> None:
        """Wait for the deliveries in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """The stop: deliveries in flight get ``stop_grace_s`` to finish; the others are cancelled, their
        claims released and the outcomes they were recording recorded (if that fails, their claims wait
        out the lease)."""
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=self.stop_grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)  # at once: a cancelled notify awaits nothing more
            try:  # one insert: bounded as every ClickHouse write (and the stop by kafka.shutdown_timeout_s)
                await self._settle_cancelled()
            except Exception as exc:
                log.error("alert deliveries cancelled by the stop stay claimed until the lease ends: %r", exc)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
