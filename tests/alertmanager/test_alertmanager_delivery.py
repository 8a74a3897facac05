"""The product's alert engine delivering to a real Alertmanager: a drift fires one alert, the recovery
resolves it, seen through Alertmanager's own API (GET /api/v2/alerts).

Two AlertEngine instances over one chDB store stand in for two workers (both close every window, at
the same time): the delivery ledger lets one of them post each transition.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from pipeline.clock import SystemClock
from schemas.alert import AlertRules
from schemas.window import WindowAggregate
from streams.alerts.engine import AlertEngine
from streams.alerts.rules import load_rules
from streams.clickhouse.leases import DeliveryLedger
from streams.clickhouse.store import ClickHouseStore
from streams.windows.tumbling import TumblingWindows
from tests.fixtures import messages
from tests.fixtures.wall_clock import recent
from tests.settings_factory import make_settings

HOUR = timedelta(hours=1)
RULES = """
rules:
  - name: hallucination-drift
    kind: baseline
    metric: hallucination_rate
    baseline_windows: 12
    min_interactions: 50
    for: 2
    resolve_for: 2
    severity: critical
receivers:
  - name: am
    kind: alertmanager
    url: {url}
    retries: 2
    backoff_s: 0
"""


def window(start: datetime, bad: int, n: int = 200) -> WindowAggregate:
    return messages.window(
        start, app="wiki-qa", model="beta", count=n, mean_context_entailment=0.8, context_scored=n,
        answered=n, hallucinations=bad, hallucination_rate=bad / n, answer_refusal_rate=0.0,
        answer_refusal_known=n,
    )  # fmt: skip


class NoWaitClock(SystemClock):
    """The wall clock, whose waits (delivery backoff) return at once."""

    async def sleep(self, seconds: float) -> None:
        return None


def ours(url: str) -> list[dict[str, Any]]:
    """Every alert Alertmanager holds with groundwatch's labels (active, suppressed, resolved alike)."""
    body = httpx.get(
        url + "/api/v2/alerts", params={"filter": ['app="wiki-qa"', 'model="beta"']}, timeout=5
    ).json()
    return [a for a in body if a["labels"].get("source") == "groundwatch"]


async def close_windows(
    store: ClickHouseStore, engines: list[AlertEngine], start: datetime, bads: list[int]
) -> list[str]:
    made: dict[str, str] = {}
    for i, bad in enumerate(bads):
        w = window(start + i * HOUR, bad)
        await store.insert_window(w, datetime.now(UTC))
        for out in await asyncio.gather(*(e.on_window(w) for e in engines)):
            made |= {a.alert_id: a.state for a in out}
        for e in engines:
            await e.drain()
    return list(made.values())


async def test_drift_fires_one_alertmanager_alert_and_the_recovery_resolves_it(
    alertmanager: str, store: ClickHouseStore, tmp_path: Any
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES.format(url=alertmanager), encoding="utf-8")
    rules: AlertRules = load_rules(path)
    settings = make_settings().alerts
    engines = [
        AlertEngine(
            rules, settings, TumblingWindows(3600), store, clock=NoWaitClock(), claimant=f"worker-{k}"
        )
        for k in range(2)
    ]
    # event time: the last 30 hours, so the resolution's endsAt is in the past for Alertmanager too
    start = recent(hours=30, start_of="hour")
    assert await close_windows(store, engines, start, [10] * 14) == []  # 5 %: the baseline
    assert ours(alertmanager) == []
    assert await close_windows(store, engines, start + 14 * HOUR, [40] * 3) == ["firing"]  # 20 %
    fired = ours(alertmanager)
    assert len(fired) == 1 and fired[0]["status"]["state"] == "active"
    labels = fired[0]["labels"]
    assert {k: labels[k] for k in ("app", "model", "rule", "severity")} == {
        "app": "wiki-qa", "model": "beta", "rule": "hallucination-drift", "severity": "critical",
    }  # fmt: skip
    starts = datetime.fromisoformat(fired[0]["startsAt"].replace("Z", "+00:00"))
    assert starts == start + 16 * HOUR  # the end of the second drifted window (for: 2)
    assert await close_windows(store, engines, start + 17 * HOUR, [10] * 3) == ["resolved"]
    after = ours(alertmanager)
    # the resolution reached Alertmanager: its API lists no active alert any more (a firing alert's
    # endsAt is a week ahead, so without the resolved post it would still be listed as active)
    assert after == [] or all(
        datetime.fromisoformat(a["endsAt"].replace("Z", "+00:00")) <= datetime.now(UTC) for a in after
    )
    ledger = DeliveryLedger(store).deliveries_sync()
    assert sorted(d["status"] for d in ledger if d["status"] != "claimed") == ["delivered", "delivered"]
    assert sum(e.delivered for e in engines) == 2 and sum(e.delivery_failures for e in engines) == 0
    for e in engines:
        await e.aclose()
