"""Alert notifications: one per receiver for each transition, however many workers make it; and the
refresh that keeps a firing alert alive at Alertmanager (``refresh``).

Before sending, a worker claims the delivery (alert id + receiver) in the ``alert_deliveries`` ledger;
only the earliest claim sends (``streams.clickhouse.leases``), with retries and backoff, and records the
outcome there. A delivery that fails every retry is logged as an ERROR, counted (``delivery_failures``)
and kept in the ledger with its last error. Requests carry the delivery id (``X-Groundwatch-Delivery``)
and Alertmanager merges posts of the same labels, so the rare double send of two claims racing within
one round trip is still one notification at those receivers (docs/alerts.md).

Every delivery ends within its receiver's ``delivery_timeout_s``. At a stop (``aclose``) the deliveries
in flight get ``stop_grace_s`` (a third of ``kafka.shutdown_timeout_s``) to finish; the rest are
cancelled and their claims released, so the next worker sends them at once instead of after the lease.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any

import httpx

from pipeline.clock import Clock
from schemas.alert import Alert
from schemas.settings import AlertSettings
from streams.alerts.receivers import Target
from streams.alerts.webhook import Outcome
from streams.clickhouse.leases import Claim, DeliveryLedger

log = logging.getLogger(__name__)


def _log_failure(task: asyncio.Task[bool]) -> None:
    """Done-callback of a delivery task: an exception (a bug or a ledger outage) is logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.error("alert delivery crashed", exc_info=task.exception())


class Deliveries:
    """The notifications of one worker's alert engine to ``targets`` (module docstring)."""

    def __init__(
        self,
        settings: AlertSettings,
        ledger: DeliveryLedger,
        targets: list[Target],
        clock: Clock,
        *,
        claimant: str | None = None,
        stop_grace_s: float = 10.0,
    ) -> None:
        self.settings = settings
        self.ledger = ledger  # who sends each notification
        self.targets = targets
        self.clock = clock
        self.claimant = claimant or uuid.uuid4().hex  # this engine's name in the delivery ledger
        self.stop_grace_s = stop_grace_s  # how long a stop waits for deliveries in flight (aclose)
        self.delivered = 0
        self.delivery_failures = 0
        self._http: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[bool]] = set()
        self._last_redeliver: datetime | None = None
        self._sending: set[str] = set()  # delivery ids this engine is sending now (never two at once)
        self._unsent: list[Claim] = []  # cancelled by the stop before an outcome: released by aclose
        self._unrecorded: list[tuple[str, Outcome]] = []  # cancelled by the stop while recording it
        # firing alert id -> when Alertmanager last heard of it, oldest first, within the last refresh period
        self._refreshed: dict[str, datetime] = {}

    def client(self) -> httpx.AsyncClient:
        """The HTTP client the receivers are posted with (made at the first post, closed by ``aclose``)."""
        if self._http is None:
            self._http = httpx.AsyncClient()
        return self._http

    @property
    def refreshes(self) -> bool:
        """Whether any receiver is an Alertmanager, which needs its firing alerts posted again."""
        return any(t.receiver.kind == "alertmanager" for t in self.targets)

    async def refresh(self, latest: Alert | None) -> bool:
        """Post a still-firing alert (a series' ``latest`` transition) to the Alertmanager receivers
        again, every quarter of their ``firing_ttl_hours``, moving its endsAt forward, so Alertmanager
        never resolves an incident groundwatch still has open (as Prometheus re-sends its active alerts).
        Alertmanager merges the posts into one alert: no new notification. Not recorded in the ledger.
        False when nothing was posted."""
        targets = [t for t in self.targets if t.receiver.kind == "alertmanager"]
        if not targets or latest is None or latest.state != "firing":
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
        for target in targets:
            outcome = await target.send(
                self.client(), latest, f"{latest.alert_id}|{target.name}", now, self.clock.sleep
            )
            if not outcome.ok:
                log.warning(
                    "alert %s: refreshing it in %s failed: %s", latest.alert_id, target.name, outcome.error
                )
        return True

    def send(self, alert: Alert) -> None:
        """Notify every receiver of a transition, in the background."""
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
            outcome = await target.send(self.client(), alert, delivery_id, self.clock.now(), self.clock.sleep)
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
