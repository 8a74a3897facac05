"""A backlog of windows for a worker's stop, shared by ``tests/integration/test_stream_stop_backlog.py``
and ``benchmarks/worker_stop.py``: one interaction in each window of two apps, an alert rule that fires
on every window of the app that flaps, the settings that keep the windows open until the stop, and
readers of what the worker logs about closing them."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.integration.traffic import CONTEXT, GROUNDED, HALLUCINATED

#: "flapping" hallucinates in every other run of this many windows (its rule fires and resolves again)
FLAP = 40

RULES = """
rules:
  - name: flapping
    metric: hallucination_rate
    op: ">"
    threshold: 0.5
    windows: 1
    min_interactions: 1
    cooldown_seconds: 0
"""

CLOSED = re.compile(r"window (\S+) (\S+)/(\S+) closed: ")
ON_STOP = re.compile(r"windows on stop: (\d+) closed in [\d.]+ s, (?:none left|(\d+) LEFT)")


def records(start: datetime, per_app: int, window_s: int) -> list[dict[str, Any]]:
    """``per_app`` windows of ``window_s`` seconds from ``start``, one interaction each, for two apps:
    "steady" always grounded, "flapping" hallucinating in every other run of ``FLAP`` windows."""
    out = []
    for i in range(per_app):
        at = (start + timedelta(seconds=window_s * i + 0.5)).isoformat()
        for app, pairs in (("steady", GROUNDED), ("flapping", HALLUCINATED if i // FLAP % 2 else GROUNDED)):
            question, answer = pairs[i % len(pairs)]
            out.append({
                "interaction_id": f"{app}-{i}", "app": app, "model": "m1", "timestamp": at,
                "question": question, "contexts": [CONTEXT], "answer": answer,
            })  # fmt: skip
    return out


def settings(rules: Path, per_app: int, window_s: int, due_before_stop: int) -> dict[str, str]:
    """The worker's settings for ``records``: the alert rules in ``rules`` (``RULES`` written there), and
    a grace that makes only the first ``due_before_stop`` windows of each app (about) due by the watermark
    while the stream runs; the rest wait for the stop (idle closing is off)."""
    rules.write_text(RULES)
    return {
        "GROUNDWATCH_ALERTS__RULES_FILE": str(rules),
        "GROUNDWATCH_WINDOW__SIZE_SECONDS": str(window_s),
        "GROUNDWATCH_WINDOW__GRACE_SECONDS": str(window_s * (per_app - due_before_stop)),
        "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "36000",
    }


def closed_keys(log: str) -> Counter[tuple[str, str, str]]:
    """How many times the log says each window (start, app, model) closed."""
    return Counter((m[1], m[2], m[3]) for m in CLOSED.finditer(log))


def on_stop(log: str) -> tuple[int, int] | None:
    """The stop's summary line: (windows closed, windows left for the next start), or None without one."""
    found = ON_STOP.search(log)
    return (int(found[1]), int(found[2] or 0)) if found else None
