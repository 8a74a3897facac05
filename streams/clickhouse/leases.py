"""The alert-delivery ledger (``alert_deliveries``, migration 004): who sends each notification.

A worker claims a delivery (alert id + receiver) before sending it; the earliest live claim sends. A
claim is a lease: one older than ``alerts.delivery_lease_s`` with no outcome recorded is dead (its worker
stopped between claiming and recording) and another worker takes the delivery over. A stop releases the
claims it leaves unsent, so the next worker takes them at once. The table is a ReplacingMergeTree keyed
by (delivery, claimant) with ``updated_at`` as its version: an outcome or a release replaces its claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.alert import Alert
from schemas.utc import utc
from streams.clickhouse.rows import ALERT_COLUMNS
from streams.clickhouse.sql import TS
from streams.clickhouse.store import ClickHouseStore

_TABLE = "alert_deliveries"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Claim:
    """A delivery claimed in the ledger (``DeliveryLedger.claim``), as ``release`` gives it up."""

    delivery_id: str
    alert_id: str
    receiver: str
    claimed_at: datetime


#: the ledger rows that hold a delivery: an outcome (delivered, failed) or a claim younger than the lease
#: (a released claim, or one older than the lease, holds nothing); ``stale`` is the lease's start
LIVE_OR_SETTLED = (
    f"(status IN ('delivered', 'failed') OR (status = 'claimed' AND claimed_at >= {{stale:{TS}}}))"
)

DELIVERY_COLUMNS = [
    "delivery_id", "alert_id", "receiver", "claimant", "claimed_at",
    "status", "attempts", "error", "updated_at",
]  # fmt: skip


class DeliveryLedger:
    """Claims, outcomes and releases of alert deliveries over an open ``ClickHouseStore``."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.db = store.db

    async def claim(self, claim: Claim, claimant: str, stale_before: datetime | None = None) -> bool:
        """Claim a notification for ``claimant``; True when this claim arrived first (the server's
        insert time) among the live ones, so this claimant sends; a delivery already recorded as
        delivered or failed is never claimed again. Any reader that sees a later claim also sees the
        first one. A claim made before ``stale_before`` without an outcome is dead (its worker stopped
        between claiming and recording): it no longer counts, so another claimant takes the delivery;
        nor does a released one (``release``)."""
        # a claim's version (updated_at) is the epoch: an outcome row always replaces it, never the reverse
        row = [claim.delivery_id, claim.alert_id, claim.receiver, claimant, utc(claim.claimed_at),
               "claimed", 0, "", _EPOCH]  # fmt: skip
        await self.store.insert_rows(_TABLE, [row], DELIVERY_COLUMNS)
        rows = await self.store.query(
            f"SELECT claimant, status FROM {self.db}.{_TABLE} FINAL WHERE delivery_id = {{d:String}} "
            f"AND {LIVE_OR_SETTLED} "
            "ORDER BY status = 'claimed' ASC, inserted ASC, claimant ASC LIMIT 1",
            {"d": claim.delivery_id, "stale": utc(stale_before) if stale_before else _EPOCH},
        )
        return bool(rows) and rows[0]["status"] == "claimed" and rows[0]["claimant"] == claimant

    async def undelivered(
        self, receivers: Sequence[str], since: datetime, stale_before: datetime
    ) -> list[tuple[Alert, str]]:
        """(alert, receiver) of the transitions since ``since`` (wall time) that no receiver outcome
        records and no live claim covers: a worker stopped after writing the transition and before its
        notification was recorded, or released it unsent. Oldest first."""
        if not receivers:
            return []
        alerts = await self.store.query(
            "SELECT " + ", ".join(ALERT_COLUMNS) + f" FROM {self.db}.alerts FINAL "
            f"WHERE fired_at >= {{since:{TS}}} ORDER BY fired_at, alert_id",
            {"since": utc(since)},
        )
        if not alerts:
            return []
        settled = await self.store.query(
            f"SELECT DISTINCT delivery_id FROM {self.db}.{_TABLE} FINAL "
            f"WHERE claimed_at >= {{since:{TS}}} AND {LIVE_OR_SETTLED}",
            {"since": utc(since) - timedelta(days=1), "stale": utc(stale_before)},
        )
        done = {r["delivery_id"] for r in settled}
        out = []
        for row in alerts:
            alert = Alert.model_validate(row)
            out += [(alert, r) for r in receivers if f"{alert.alert_id}|{r}" not in done]
        return out

    async def finish(
        self, delivery_id: str, claimant: str, status: str, attempts: int, error: str, at: datetime
    ) -> None:
        """Record the outcome of a claimed delivery (replaces the claim row of this claimant)."""
        rows = await self.store.query(
            "SELECT " + ", ".join(DELIVERY_COLUMNS) + f" FROM {self.db}.{_TABLE} FINAL "
            "WHERE delivery_id = {d:String} AND claimant = {c:String}",
            {"d": delivery_id, "c": claimant},
        )
        claim: dict[str, Any] = rows[0] if rows else {"alert_id": "", "receiver": "", "claimed_at": at}
        row = [delivery_id, claim["alert_id"], claim["receiver"], claimant, utc(claim["claimed_at"]),
               status, attempts, error[:2000], utc(at)]  # fmt: skip
        await self.store.insert_rows(_TABLE, [row], DELIVERY_COLUMNS)

    async def release(self, claims: Sequence[Claim], claimant: str, at: datetime) -> None:
        """Give up claims without an outcome (the worker stops): each delivery is anyone's again at once,
        without waiting for the lease. One insert; each row replaces its claim (``at`` is a later
        version than a claim's) even if the claim's own insert lands after it, and stays, with status
        ``released``."""
        if not claims:
            return
        rows = [
            [c.delivery_id, c.alert_id, c.receiver, claimant, utc(c.claimed_at), "released", 0,
             "released without an outcome at a stop", utc(at)]
            for c in claims
        ]  # fmt: skip
        await self.store.insert_rows(_TABLE, rows, DELIVERY_COLUMNS)

    def deliveries_sync(self) -> list[dict[str, Any]]:
        """Every claim and outcome in the ledger (deduplicated), oldest claim first."""
        return self.store.query_sync(
            "SELECT " + ", ".join(DELIVERY_COLUMNS) + f" FROM {self.db}.{_TABLE} FINAL "
            "ORDER BY claimed_at, delivery_id, claimant"
        )
