"""Tumbling windows (``GROUNDWATCH_WINDOW__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WindowSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    size_seconds: int = Field(60, ge=1, description="tumbling window size")
    grace_seconds: int = Field(
        5,
        ge=0,
        description="a window closes once its app and model's event-time watermark is this far past its end",
    )
    idle_close_seconds: float = Field(
        10.0,
        ge=0,
        description=(
            "a window also closes when no row has landed in it for this long (wall clock), so the last "
            "window "
            "of a stream that goes quiet is written; later rows reopen and recompute it"
        ),
    )
    tick_seconds: float = Field(1.0, gt=0, description="how often due windows are looked for")
    reconcile_hours: float = Field(
        24.0,
        gt=0,
        description="when the group assigns a worker partitions (at start, at a rebalance), recompute the "
        "windows and conversations of theirs left unclosed this far back",
    )
    max_skew_seconds: float = Field(
        300.0,
        ge=0,
        description=(
            "the event-time watermark (one per app and model) takes no timestamp beyond wall clock + this: "
            "one "
            "event stamped in the future cannot close windows early"
        ),
    )
    max_close_attempts: int = Field(
        5,
        ge=1,
        description="a window whose close fails this many ticks in a row is dropped from the pending "
        "windows with an ERROR log naming it (the other windows are closed regardless)",
    )
    close_batch: int = Field(
        100,
        ge=1,
        le=10_000,
        description="due windows closed together: their rows read in one query per app and model and "
        "their aggregates written in one insert, oldest first. A stop closes the pending windows in such "
        "batches for at most a third of kafka.shutdown_timeout_s, and leaves the rest (logged) for the "
        "next start to recompute",
    )
