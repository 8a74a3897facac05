"""Alert rules and the webhook (``GROUNDWATCH_ALERTS__*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class AlertSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rules_file: Path | None = Field(
        None, description="YAML alert rules (deploy/alerts/rules.example.yaml); none: no alerts"
    )
    webhook_url: SecretStr | None = Field(
        None,
        description="Slack-compatible webhook the alerts are posted to; a secret (hook URLs are "
        "credentials): pass it via the environment",
    )
    webhook_retries: int = Field(3, ge=0, description="retries of a failed webhook post")
    webhook_backoff_s: float = Field(0.5, ge=0, description="first webhook retry delay (doubles)")
    webhook_timeout_s: float = Field(5.0, gt=0, description="timeout of one webhook post")
    delivery_lease_s: float = Field(
        600.0,
        gt=0,
        description="a delivery claimed this long ago with no outcome recorded is taken over by another "
        "worker (its claimant stopped mid-send); longer than a send with all its retries takes",
    )
    redeliver_hours: float = Field(
        24.0,
        gt=0,
        description="how far back a worker looks for transitions whose notification was never recorded",
    )
