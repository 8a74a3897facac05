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

Notifications go through ``streams.alerts.delivery`` (one per receiver, claimed in a ledger, sent with
retries, released at a stop).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.clock import Clock, SystemClock
from schemas.alert import Alert, AlertRules
from schemas.settings import AlertSettings, Settings
from schemas.utc import utc
from schemas.window import WindowAggregate
from streams.alerts.delivery import Deliveries
from streams.alerts.judge_drift import JudgeDrift
from streams.alerts.lifecycle import Rule, Slot, decide, history_needed
from streams.alerts.receivers import Target, resolve
from streams.alerts.rules import RuleEvaluator, load_rules
from streams.alerts.slices import slice_observations
from streams.alerts.stats import EMPTY, Obs, observe
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.leases import DeliveryLedger
from streams.clickhouse.store import ClickHouseStore
from streams.judge_quality import correct_threshold
from streams.windows.tumbling import TumblingWindows

log = logging.getLogger(__name__)

Publish = Callable[[Alert, str], Awaitable[None]]


def _order(alert: Alert) -> tuple[datetime, bool]:
    """How ``ClickHouseStore.latest_alert`` orders a rule's transitions (the greatest is the latest)."""
    return alert.window_end, alert.state == "resolved"


@dataclass
class Series:
    """What ``decide`` needs of one rule's series (app, model, slice) besides its windows: its latest
    transition and when it last fired; ``made`` moves both on after a transition."""

    latest: Alert | None
    last_fired: datetime | None

    @property
    def open_alert(self) -> Alert | None:
        return self.latest if self.latest is not None and self.latest.state == "firing" else None

    def stands(self, window: WindowAggregate) -> bool:
        """An older window closed again after a later transition: history stands, nothing is decided."""
        return self.latest is not None and window.window_end < self.latest.window_end

    def made(self, alert: Alert) -> None:
        if self.latest is None or _order(alert) >= _order(self.latest):
            self.latest = alert
        if alert.state == "firing" and (self.last_fired is None or alert.window_end > self.last_fired):
            self.last_fired = alert.window_end


def _seen(by_start: dict[datetime, Obs]) -> Callable[[datetime], Obs]:
    return lambda start: by_start.get(start, EMPTY)


def slots(first: datetime, n: int, size_s: int, observed: Callable[[datetime], Obs]) -> list[Slot]:
    """The ``n`` windows of ``size_s`` seconds from ``first`` as ``decide`` reads them, each with what
    was observed in it (``EMPTY`` for a window with no traffic)."""
    size = timedelta(seconds=size_s)
    return [Slot(first + i * size, first + (i + 1) * size, observed(first + i * size)) for i in range(n)]


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
        self.publish = publish
        self.clock: Clock = clock or SystemClock()  # stamps transitions, leases, deliveries; their backoff
        receivers = resolve(rules.receivers, settings) if targets is None else targets
        self.deliveries = Deliveries(
            settings,
            DeliveryLedger(store),
            receivers,
            self.clock,
            claimant=claimant,
            stop_grace_s=stop_grace_s,
        )
        # rules on the judge's agreement with people's labels (streams.alerts.judge_drift)
        # (by default with the default settings: no environment read here)
        self.drift = drift or JudgeDrift(
            LabelStore(store).latest_labeled, correct_threshold(Settings.model_construct())
        )
        self.fired = 0  # transitions made (firing and resolved)

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

    def _observed(self, rule: Rule, by_start: dict[datetime, WindowAggregate]) -> Callable[[datetime], Obs]:
        def observed(start: datetime) -> Obs:
            found = by_start.get(start)
            return observe(rule.metric, found) if found is not None else EMPTY

        return observed

    async def _series(self, rule: Rule, app: str, model: str, slice_: str = "") -> Series:
        last_fired = await self.store.last_alert_end(rule.name, app, model, slice_)
        return Series(await self.store.latest_alert(rule.name, app, model, slice_), last_fired)

    async def evaluate(self, rule: Rule, window: WindowAggregate) -> Alert | None:
        """The transition this window makes for one rule (None: none, or already made)."""
        series = await self._series(rule, window.app, window.model)
        if series.stands(window):
            return None
        if rule.judge_metric:
            size = timedelta(seconds=self.windows.size_seconds)
            alert = await self.drift.decide(
                rule, window.app, window.model, window.window_end, size, series.open_alert,
                series.last_fired, self.clock.now(),
            )  # fmt: skip
        else:
            n = history_needed(rule)
            first, _ = self.windows.last_k(window.window_start, n)
            stored = await self.store.alert_windows(window.app, window.model, first, window.window_start)
            by_start = {utc(w.window_start): w for w in [*stored, window]}
            found = slots(first, n, self.windows.size_seconds, self._observed(rule, by_start))
            alert = decide(
                rule, window.app, window.model, found, series.open_alert, series.last_fired, self.clock.now()
            )
        if alert is None or await self.store.alert_exists(alert.alert_id):
            return None
        return alert

    async def sliced(self, rule: Rule, window: WindowAggregate) -> list[Alert]:
        """The transitions this window makes for a rule with group_by, one lifecycle per slice
        (streams/alerts/slices.py)."""
        n = history_needed(rule)
        first, _ = self.windows.last_k(window.window_start, n)
        size = self.windows.size_seconds
        observed = await slice_observations(
            self.store, rule, window.app, window.model, first, window.window_end, size
        )
        made = []
        for name, by_start in sorted(observed.items()):
            series = await self._series(rule, window.app, window.model, name)
            if series.stands(window):
                continue
            found = slots(first, n, size, _seen(by_start))
            alert = decide(
                rule, window.app, window.model, found, series.open_alert, series.last_fired,
                self.clock.now(), name,
            )  # fmt: skip
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
        by_start = {utc(w.window_start): w for w in [*stored, *run]}
        observed = self._observed(rule, by_start)
        made_ids = set(await self.store.alert_ids_since(rule.name, app, model, start))
        series = Series(None, last_fired)
        latest = await self.store.latest_alert(rule.name, app, model)
        if latest is not None:
            series.made(latest)
        made = []
        for window in run:
            if series.stands(window):
                await self.refresh_firing(rule, window)
                continue
            first, _ = self.windows.last_k(window.window_start, n)
            found = slots(first, n, self.windows.size_seconds, observed)
            alert = decide(rule, app, model, found, series.open_alert, series.last_fired, self.clock.now())
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
            series.made(alert)
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
        """Keep a still-firing alert of this rule alive at Alertmanager (``Deliveries.refresh``)."""
        if not self.deliveries.refreshes:
            return False
        latest = await self.store.latest_alert(rule.name, window.app, window.model)
        return await self.deliveries.refresh(latest)

    async def deliver(self, alert: Alert) -> None:
        if self.publish is not None:  # first: when it fails, nothing marks the transition as made
            await self.publish(alert, alert.alert_id)
        await self.store.insert_alert(alert)  # then the table (the next evaluation reads it)
        self.fired += 1
        log.warning("ALERT %s", alert.message)
        self.deliveries.send(alert)

    # ---- notifications (streams.alerts.delivery) ----------------------------------------------------
    @property
    def targets(self) -> list[Target]:
        return self.deliveries.targets

    @property
    def delivered(self) -> int:
        return self.deliveries.delivered

    @property
    def delivery_failures(self) -> int:
        return self.deliveries.delivery_failures

    async def redeliver_due(self) -> int:
        return await self.deliveries.redeliver_due()

    async def redeliver(self) -> int:
        return await self.deliveries.redeliver()

    async def notify(self, target: Target, alert: Alert) -> bool:
        return await self.deliveries.notify(target, alert)

    async def drain(self) -> None:
        await self.deliveries.drain()

    async def aclose(self) -> None:
        await self.deliveries.aclose()
