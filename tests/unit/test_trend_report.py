"""`groundwatch report` pieces: --since parsing and the trend table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from groundwatch.trend_report import Report, parse_since, render
from schemas.evaluation_row import EvalRow
from streams.windows.aggregator import WindowStats

NOW = datetime(2026, 1, 2, 0, 0, tzinfo=UTC)


def test_parse_since() -> None:
    assert parse_since(None) is None
    assert parse_since("30m", NOW) == NOW - timedelta(minutes=30)
    assert parse_since("7d", NOW) == NOW - timedelta(days=7)
    assert parse_since("2026-01-01T10:00:00", NOW) == datetime(2026, 1, 1, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match="--since"):
        parse_since("yesterday", NOW)


def test_render_groups_by_app_and_model() -> None:
    rows = [
        EvalRow(
            interaction_id=str(i),
            timestamp=NOW,
            app="shop",
            model="m1",
            context_entailment=c,
            hallucination=h,
        )
        for i, (c, h) in enumerate([(0.2, True), (0.9, False)])
    ]
    w = WindowStats().extend(rows).result(window_start=NOW, window_end=NOW, app="shop", model="m1")
    text = render(Report(counts={"evaluations": 2}, windows=[w], alerts=[]))
    # the rates without a case (no refusal flag, no tool call, no citation, ...) are counted, not listed
    assert "== shop / m1: 2 interactions (2 judged) in 1 windows, hallucination rate 50.0%, 17 rates without a case ==" in text  # noqa: E501
    assert "0.550" in text and "alerts: 0" in text
    summary = render(Report(counts={"evaluations": 2}, windows=[w, w], alerts=[]), every_window=False)
    assert "== shop / m1: 4 interactions (4 judged) in 2 windows" in summary
    assert "window start" not in summary and "0.550" not in summary and "alerts: 0" in summary
