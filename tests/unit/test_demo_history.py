"""The demo's history of a user's own file (``groundwatch demo --data``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from groundwatch.demo_history import stamp_file

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)


def test_lines_without_app_or_model_count_in_the_schemas_default_series() -> None:
    """The bundled labeled sets have no app or model: the worker stores them as default / unknown, and
    the demo waits for the windows of that one series."""
    records = [{"id": f"q{k}", "question": "Why?", "answer": "Because."} for k in range(6)]
    records.append({"id": "own", "app": "mine", "question": "Why?", "answer": "Because."})
    history = stamp_file(records, days=1, now=NOW)
    assert all("app" not in json.loads(line) for line in history.lines[:6])
    assert history.windows(10**10) == 2  # (default, unknown) and (mine, unknown), one window each
    assert history.windows(3600) == 7  # every line in an hour of its own
