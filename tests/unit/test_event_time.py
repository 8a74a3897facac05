"""Event time has limits: implausible timestamps are refused with the reason, window arithmetic cannot
overflow, and one window that cannot be closed never blocks the others."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.clock import ManualClock
from schemas.errors import InvalidMessage
from schemas.evaluation_row import EvalRow
from schemas.interaction import Interaction
from schemas.results import Converted
from schemas.settings import Limits, WindowSettings
from schemas.window import WindowAggregate
from streams.clickhouse.store import ClickHouseStore
from streams.codec import dead_letter, decode
from streams.windows.closer import WindowCloser
from streams.windows.tumbling import MAX_TIME, MIN_TIME, TumblingWindows
from tests.fixtures.evaluations import evaluation

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def raw(timestamp: object) -> bytes:
    return json.dumps({"id": "t1", "question": "Q?", "answer": "A.", "timestamp": timestamp}).encode()


@pytest.mark.parametrize(
    ("timestamp", "reason"),
    [
        ("9999-12-31T23:59:59Z", "seconds after the wall clock"),
        ("0001-01-01T00:00:00Z", "days before the wall clock"),
        ("0001-01-01T00:00:00+01:00", "has no UTC time"),
        (-62135596800, "days before the wall clock"),  # year 1 in seconds, read as 1968 ms before
        (1_780_000_000_000, "milliseconds are not accepted"),  # ms: refused, not guessed
        ("1780000000000", "milliseconds are not accepted"),
        ((NOW + timedelta(seconds=3601)).isoformat(), "max_event_future_seconds"),
        ((NOW - timedelta(days=401)).isoformat(), "max_event_age_days"),
    ],
)
def test_implausible_timestamps_are_refused_with_the_reason(timestamp: object, reason: str) -> None:
    with pytest.raises(InvalidMessage) as err:
        decode(raw(timestamp), Interaction, Limits(), now=NOW)
    assert "timestamp" in str(err.value) and reason in str(err.value)
    assert err.value.interaction_id == "t1"
    letter = dead_letter(
        failed_at=FAILED_AT, stage="validate", error=err.value, payload=raw(timestamp), source_topic="in"
    )
    assert letter.stage == "validate" and reason in letter.error


def test_plausible_timestamps_and_numbers_as_seconds() -> None:
    seconds = int((NOW - timedelta(hours=1)).timestamp())
    assert decode(raw(seconds), Interaction, now=NOW).timestamp == NOW - timedelta(hours=1)
    assert decode(raw(float(seconds) + 0.5), Interaction, now=NOW).timestamp.microsecond == 500_000
    assert decode(raw(str(seconds)), Interaction, now=NOW).timestamp == NOW - timedelta(hours=1)
    edge = decode(raw((NOW + timedelta(seconds=3600)).isoformat()), Interaction, now=NOW)
    assert edge.timestamp == NOW + timedelta(hours=1)
    old = decode(raw((NOW - timedelta(days=399)).isoformat()), Interaction, now=NOW)
    assert old.timestamp == NOW - timedelta(days=399)


def test_the_limits_are_settings() -> None:
    tight = Limits(max_event_age_days=1, max_event_future_seconds=0)
    with pytest.raises(InvalidMessage, match="more than 1 days before"):
        decode(raw((NOW - timedelta(days=2)).isoformat()), Interaction, tight, now=NOW)
    with pytest.raises(InvalidMessage, match="more than 0 seconds after"):
        decode(raw((NOW + timedelta(seconds=1)).isoformat()), Interaction, tight, now=NOW)


def test_nested_and_stored_interactions_are_not_rechecked_against_the_clock() -> None:
    """An interaction inside a later message was checked when it entered; one read back (dashboard,
    offline eval) has no clock in its context."""
    old = Interaction.model_validate({"id": "o", "question": "Q?", "answer": "A.", "timestamp": "2001-01-01"})
    assert old.timestamp.year == 2001
    converted = Converted.model_validate(
        {"interaction": old.model_dump(mode="json"), "question_sentences": [], "answer_sentences": [],
         "ground_truth_sentences": []}
    )  # fmt: skip
    assert decode(converted.model_dump_json(), Converted, now=NOW).interaction.timestamp.year == 2001


def test_window_arithmetic_never_overflows() -> None:
    windows = TumblingWindows(3600)
    top = windows.start_of(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert windows.end_of(top) == MAX_TIME
    bottom = windows.start_of(datetime(1, 1, 1, tzinfo=UTC))
    assert bottom == MIN_TIME and windows.end_of(bottom) == MIN_TIME + timedelta(hours=1)
    assert windows.last_k(bottom, 5)[0] == MIN_TIME
    assert windows.last_k(top, 5)[0] == top - timedelta(hours=4)


@dataclass
class Row:
    app: str
    model: str
    timestamp: datetime


class FlakyStore:
    """A store that refuses the windows of one app (as chDB refused year 1), and records the others."""

    def __init__(self, bad_app: str) -> None:
        self.bad_app = bad_app
        self.written: list[WindowAggregate] = []

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]:
        if app == self.bad_app:
            raise ValueError(f"Cannot parse DateTime64 parameter {min(starts).isoformat()}")
        return []

    async def insert_windows(self, windows: Sequence[WindowAggregate], computed_at: datetime) -> None:
        self.written.extend(windows)

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        return []

    async def server_now(self) -> datetime:
        return datetime(2026, 11, 20, tzinfo=UTC)


async def test_one_bad_window_never_blocks_the_others(caplog: pytest.LogCaptureFixture) -> None:
    store = FlakyStore("bad")
    closer = WindowCloser(
        WindowSettings(size_seconds=60, max_close_attempts=3), store, clock=ManualClock(NOW)
    )
    far = [
        Row("bad", "m", datetime(1, 1, 1, tzinfo=UTC)),
        Row("bad", "m", datetime(9999, 12, 31, tzinfo=UTC)),
    ]
    good = [Row("good", "m", NOW), Row("good", "m", NOW + timedelta(minutes=1))]
    await closer.touch([*far, *good])
    caplog.set_level(logging.WARNING, logger="streams.windows.closer")
    closed = await closer.close_due(final=True)  # the bad ones come first in start order
    assert sorted(w.window_start for w in closed) == [NOW, NOW + timedelta(minutes=1)]
    # the later bad window waits for the first (the windows of an app and model close in order)
    assert closer.failed == 1 and len(closer.pending()) == 2 and closer.dropped == 0
    assert "window 0001-01-01T00:00:00+00:00 bad/m: closing failed (attempt 1 of 3" in caplog.text
    await closer.close_due(final=True)
    assert closer.failed == 2 and len(closer.pending()) == 2
    await closer.close_due(final=True)  # third failure: dropped, with an ERROR log naming it
    assert closer.failed == 4 and len(closer.pending()) == 1 and closer.dropped == 1  # the next one tried
    await closer.close_due(final=True)
    await closer.close_due(final=True)
    assert closer.failed == 6 and closer.pending() == [] and closer.dropped == 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and "DROPPED" in errors[0].getMessage()
    assert "9999-12-31" in errors[1].getMessage()
    assert await closer.close_due(final=True) == []  # nothing left to retry
    assert len(store.written) == 2


async def test_on_chdb_windows_at_the_ends_of_time_fail_alone(store: ClickHouseStore) -> None:
    """The probe's timestamps reach the closer (as from rows written before validation had limits): the
    real window is written whatever chDB says about the others."""
    closer = WindowCloser(
        WindowSettings(size_seconds=60, max_close_attempts=1), store, clock=ManualClock(NOW)
    )
    row = evaluation("ok").model_copy(update={"timestamp": NOW})
    await store.insert_evaluations([row])
    far = [
        Row("a", "m", datetime(1, 1, 1, tzinfo=UTC)),
        Row("a", "m", datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    ]
    await closer.touch([*far, row])
    closed = await closer.close_due(final=True)
    assert [(w.window_start, w.count) for w in closed if w.window_start == NOW] == [(NOW, 1)]
    assert closer.pending() == []  # written or dropped, none left blocking
    assert closer.written + closer.dropped == 3
