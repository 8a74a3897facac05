"""The receivers of alert transitions: a signed JSON webhook, a Slack-compatible webhook, Alertmanager.

Each request carries the delivery's id (alert id + receiver; the alert id already names the transition)
in ``X-Groundwatch-Delivery``, so a receiver can drop a repeat. Alertmanager needs none: it merges posts
of the same labels (alertname, rule, app, model, metric, severity) into one alert.

Webhook signature (docs/alerts.md): ``X-Groundwatch-Signature: sha256=<hex HMAC-SHA256 of
"<timestamp>.<body>" with the secret>`` and ``X-Groundwatch-Timestamp: <unix seconds>``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from schemas.alert import Alert, Receiver
from schemas.errors import ConfigError
from schemas.settings import AlertSettings
from schemas.utc import utc
from streams.alerts.webhook import JSON, Outcome, Sleep, json_bytes, post_with_retries

LEGACY = "webhook"  # the receiver GROUNDWATCH_ALERTS__WEBHOOK_URL becomes


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _iso(ts: datetime) -> str:
    return utc(ts).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def alertmanager_alert(alert: Alert, now: datetime, ttl: timedelta) -> dict[str, Any]:
    """One alert of Alertmanager's v2 API. Firing: endsAt = now + ttl (Alertmanager would otherwise
    resolve it after its resolve_timeout, since groundwatch posts once per transition); resolved:
    endsAt = the event time it resolved."""
    starts = alert.starts_at or alert.window_end
    ends = alert.ends_at if alert.state == "resolved" and alert.ends_at else now + ttl
    annotations = {"summary": alert.message, "value": f"{alert.value:.4f}", "incident": alert.incident}
    if alert.baseline is not None:
        annotations["baseline"] = f"{alert.baseline:.4f}"
    return {
        "labels": {
            "alertname": alert.rule, "rule": alert.rule, "app": alert.app, "model": alert.model,
            "metric": alert.metric, "severity": alert.severity, "source": "groundwatch",
        },
        "annotations": annotations,
        "startsAt": _iso(starts),
        "endsAt": _iso(ends),
    }  # fmt: skip


@dataclass(frozen=True)
class Target:
    """A receiver with its URL and secret resolved from the rules file or the environment."""

    receiver: Receiver
    url: str
    secret: str | None = None

    @property
    def name(self) -> str:
        return self.receiver.name

    def request(self, alert: Alert, delivery_id: str, now: datetime) -> tuple[str, bytes, dict[str, str]]:
        r = self.receiver
        headers = {**JSON, "X-Groundwatch-Delivery": delivery_id}
        if r.kind == "slack":
            return self.url, json_bytes({"text": alert.message}), headers
        if r.kind == "alertmanager":
            payload = [alertmanager_alert(alert, now, timedelta(hours=r.firing_ttl_hours))]
            return self.url.rstrip("/") + "/api/v2/alerts", json_bytes(payload), headers
        body = json_bytes({"delivery_id": delivery_id, "alert": alert.model_dump(mode="json")})
        if self.secret is not None:
            ts = int(now.timestamp())
            headers |= {"X-Groundwatch-Timestamp": str(ts), r.signature_header: sign(self.secret, ts, body)}
        return self.url, body, headers

    async def send(
        self, client: httpx.AsyncClient, alert: Alert, delivery_id: str, now: datetime, sleep: Sleep
    ) -> Outcome:
        url, body, headers = self.request(alert, delivery_id, now)
        r = self.receiver
        return await post_with_retries(
            client, url, content=body, headers=headers, retries=r.retries, backoff_s=r.backoff_s,
            what=f"receiver {r.name} ({r.kind})", sleep=sleep, timeout_s=r.timeout_s,
            deadline_s=r.delivery_timeout_s,
        )  # fmt: skip


def _from_env(env: Mapping[str, str], name: str, receiver: str, what: str) -> str:
    value = env.get(name)
    if not value:
        raise ConfigError(f"alert receiver {receiver!r}: environment variable {name} ({what}) is not set")
    return value


def resolve(
    receivers: list[Receiver], settings: AlertSettings, env: Mapping[str, str] | None = None
) -> list[Target]:
    """The rules file's receivers, plus GROUNDWATCH_ALERTS__WEBHOOK_URL as a Slack-compatible one."""
    env = os.environ if env is None else env
    out = []
    for r in receivers:
        url = r.url if r.url is not None else _from_env(env, r.url_env or "", r.name, "its URL")
        secret = r.secret if r.secret_env is None else _from_env(env, r.secret_env, r.name, "its secret")
        out.append(Target(r, url, secret))
    if settings.webhook_url is not None:
        if any(r.name == LEGACY for r in receivers):
            raise ConfigError(
                f"a rules-file receiver is named {LEGACY!r}: that name is GROUNDWATCH_ALERTS__WEBHOOK_URL's"
            )
        legacy = Receiver(
            name=LEGACY, kind="slack", url="set-from-settings", retries=settings.webhook_retries,
            backoff_s=settings.webhook_backoff_s, timeout_s=settings.webhook_timeout_s,
        )  # fmt: skip
        out.append(Target(legacy, settings.webhook_url.get_secret_value()))
    for target in out:  # a delivery outliving its lease would be taken over and sent twice
        if target.receiver.delivery_timeout_s >= settings.delivery_lease_s:
            raise ConfigError(
                f"alert receiver {target.name!r}: delivery_timeout_s={target.receiver.delivery_timeout_s:g} "
                f"must be below alerts.delivery_lease_s={settings.delivery_lease_s:g}"
            )
    return out
