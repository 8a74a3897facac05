"""Evaluates the alert rules on each closed window and delivers firings: alerts topic, table, webhook.

Order: the alerts topic first (keyed by alert_id; consumers dedupe on it), then the ``alerts`` table (what
cool-downs and "already fired" read), then the webhook in the background. A failed publish raises before
the table row exists, so the window stays due (streams.windows.tracker) and the firing is retried; a
retry after a publish whose table insert failed publishes the same alert_id again (at-least-once).

Several workers: each closes the windows of the rows its sink wrote, so the same (app, model, window)
can be closed by more than one worker, and both may see ``alert_exists`` false before either inserted:
the alert then goes out once per such worker (same alert_id on the topic, one row in the table, but a
webhook post each). Run the alert rules in one worker (``GROUNDWATCH_ALERTS__RULES_FILE`` on one worker
only) when duplicate webhook posts matter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import httpx

from schemas.alert import Alert, AlertRules
from schemas.settings import AlertSettings, Settings
from schemas.window import WindowAggregate
from streams.alerts.rules import RuleEvaluator, load_rules
from streams.alerts.webhook import post_webhook
from streams.clickhouse.store import ClickHouseStore
from streams.windows.aggregator import WindowStats
from streams.windows.tumbling import TumblingWindows

log = logging.getLogger(__name__)

Publish = Callable[[Alert, str], Awaitable[None]]


def _log_failure(task: asyncio.Task[bool]) -> None:
    """Done-callback of a webhook task: an exception (a bug, not an HTTP error) is logged, not lost."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("webhook delivery crashed", exc_info=exc)
    elif task.result() is False:
        log.error("webhook delivery failed after its retries")


class AlertEngine:
    def __init__(
        self,
        rules: AlertRules,
        settings: AlertSettings,
        windows: TumblingWindows,
        store: ClickHouseStore,
        publish: Publish | None = None,
    ) -> None:
        self.evaluator = RuleEvaluator(rules)
        self.settings = settings
        self.windows = windows
        self.store = store
        self.publish = publish
        self.fired = 0
        self._http: httpx.AsyncClient | None = None
        self._hooks: set[asyncio.Task[bool]] = set()

    @classmethod
    def from_settings(
        cls, settings: Settings, store: ClickHouseStore, publish: Publish | None
    ) -> AlertEngine:
        path = settings.alerts.rules_file
        rules = load_rules(path) if path is not None else AlertRules(rules=[])
        return cls(rules, settings.alerts, TumblingWindows(settings.window.size_seconds), store, publish)

    async def pooled(self, window: WindowAggregate, k: int) -> WindowAggregate:
        """The figures of the k windows ending with ``window``, pooled from the deduplicated rows."""
        start, end = self.windows.last_k(window.window_start, k)
        rows = await self.store.rows_between(window.app, window.model, start, end)
        return (
            WindowStats()
            .extend(rows)
            .result(window_start=start, window_end=end, app=window.app, model=window.model)
        )

    async def on_window(self, window: WindowAggregate) -> list[Alert]:
        fired = []
        cache: dict[int, WindowAggregate] = {}
        for rule in self.evaluator.rules_for(window.app, window.model):
            if rule.windows not in cache:
                cache[rule.windows] = await self.pooled(window, rule.windows)
            last = await self.store.last_alert_end(rule.name, window.app, window.model)
            alert = self.evaluator.check(rule, cache[rule.windows], last_window=window, last_fired_end=last)
            if alert is None or await self.store.alert_exists(alert.alert_id):
                continue
            await self.deliver(alert)
            fired.append(alert)
        return fired

    async def deliver(self, alert: Alert) -> None:
        if self.publish is not None:  # first: when it fails, nothing marks the alert as fired
            await self.publish(alert, alert.alert_id)
        await self.store.insert_alert(alert)  # then the table (cool-downs and alert_exists read it)
        self.fired += 1
        log.warning("ALERT %s", alert.message)
        if self.settings.webhook_url:
            if self._http is None:
                self._http = httpx.AsyncClient(timeout=self.settings.webhook_timeout_s)
            task = asyncio.create_task(
                post_webhook(
                    self._http,
                    self.settings.webhook_url.get_secret_value(),
                    alert.message,
                    retries=self.settings.webhook_retries,
                    backoff_s=self.settings.webhook_backoff_s,
                )
            )
            self._hooks.add(task)
            task.add_done_callback(self._hooks.discard)
            task.add_done_callback(_log_failure)

    async def aclose(self) -> None:
        if self._hooks:
            await asyncio.gather(*self._hooks, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
