"""A message that could not be processed, with where and why."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from schemas.results import Stage


class DeadLetter(BaseModel):
    stage: Stage
    error_type: str
    error: str  # human-readable: which field and why, or the judge's last error
    source_topic: str | None = None
    interaction_id: str | None = None
    payload: str  # the original message, as text (undecodable bytes are base64 with a "base64:" prefix)
    failed_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
