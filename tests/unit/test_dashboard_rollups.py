"""Rollup choice, latency histograms that add up, Wilson intervals, the demo's simulated history."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from groundwatch.demo_history import simulate
from pipeline.metrics.wilson import wilson_interval
from schemas.latency import LATENCY_BUCKETS, add_histograms, histogram, quantile
from streams.dashboard.rollup import MAX_POINTS, choose_rollup

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"


@pytest.mark.parametrize(
    ("span", "window", "expected"),
    [
        (timedelta(hours=1), 60, ("window", 60)),
        (timedelta(hours=24), 60, ("hour", 3600)),
        (timedelta(days=7), 60, ("hour", 3600)),
        (timedelta(days=30), 60, ("6h", 21600)),
        (timedelta(days=90), 60, ("day", 86400)),
        (timedelta(days=14), 3600, ("6h", 21600)),
        (timedelta(days=2), 7200, ("window", 7200)),
    ],
)
def test_rollup_is_the_finest_with_at_most_max_points(
    span: timedelta, window: int, expected: tuple[str, int]
) -> None:
    assert choose_rollup(span, window) == expected
    assert span.total_seconds() / expected[1] <= MAX_POINTS or expected[0] == "day"


def test_a_requested_rollup_is_never_finer_than_the_windows() -> None:
    assert choose_rollup(timedelta(days=1), 7200, "hour") == ("hour", 7200)
    assert choose_rollup(timedelta(days=400), 60, "window") == ("window", 60)


def test_histograms_add_up_to_the_histogram_of_all_calls() -> None:
    rng = random.Random(3)
    windows = [[rng.lognormvariate(5, 1) for _ in range(rng.randint(0, 50))] for _ in range(30)]
    pooled = add_histograms([histogram(w) for w in windows] + [[]])  # [] = a window from before histograms
    everything = [v for w in windows for v in w]
    assert pooled == histogram(everything) and len(pooled) == LATENCY_BUCKETS
    for q in (0.5, 0.95):
        exact = float(np.percentile(everything, q * 100))  # linear between closest ranks
        assert quantile(pooled, q) == pytest.approx(exact, rel=0.2)  # within one bucket's width
    assert quantile([0] * LATENCY_BUCKETS, 0.5) is None


def test_wilson_interval_brackets_the_rate() -> None:
    low, high = wilson_interval(10, 50) or (0.0, 0.0)
    assert (
        low < 0.2 < high
        and low == pytest.approx(0.1124, abs=1e-4)
        and high == pytest.approx(0.3304, abs=1e-4)
    )
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_wilson_interval_is_exactly_0_or_1_at_none_or_all() -> None:
    """Computed, the bound at 0 of 6 is 2.8e-17 and at 28 of 28 0.9999999999999998: rankings by the
    bound (the Documents page) would order equal shares by rounding errors."""
    for n in range(1, 200):
        assert (wilson_interval(0, n) or (1.0, 0.0))[0] == 0.0
        assert (wilson_interval(n, n) or (1.0, 0.0))[1] == 1.0


def test_simulated_history_drifts_one_series_at_onset() -> None:
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    now = datetime(2026, 11, 23, 12, 30, tzinfo=UTC)
    history = simulate(records, 4000, days=10, onset_fraction=0.5, now=now, seed=5)
    rows = [json.loads(line) for line in history.lines]
    assert len({r["id"] for r in rows}) == len(rows) >= 3900
    stamps = [datetime.fromisoformat(r["timestamp"]) for r in rows]
    assert stamps == sorted(stamps) and history.start <= stamps[0] and stamps[-1] < history.end
    assert history.end == datetime(2026, 11, 23, 12, 0, tzinfo=UTC)

    def bad_share(model: str, after: bool) -> float:
        pairs = zip(rows, stamps, strict=True)
        chosen = [
            r
            for r, t in pairs
            if r["model"] == model and r["app"] == "wiki-qa" and (t >= history.onset) == after
        ]
        return sum(r["labels"].get("grounded") == 0 for r in chosen) / len(chosen)

    assert history.drifting == ("wiki-qa", "beta")
    assert bad_share("beta", False) < 0.15 and bad_share("beta", True) > 0.45
    assert bad_share("alpha", False) < 0.15 and bad_share("alpha", True) < 0.15
    assert simulate(records, 4000, days=10, onset_fraction=0.5, now=now, seed=5).lines == history.lines


def test_simulated_history_names_each_passage_as_a_document() -> None:
    """The sample's passages have no document names: each distinct passage gets one of its own, the
    same in every draw of its record, so the Documents page ranks passages; the text is unchanged."""
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    texts = {c for r in records for c in r["contexts"]}
    history = simulate(records, 2000, days=5, now=datetime(2026, 11, 23, tzinfo=UTC), seed=3)
    named: dict[str, set[str]] = {}
    for line in history.lines:
        for c in json.loads(line).get("contexts", []):  # the tool-calling agent's come from its tool
            named.setdefault(c["text"], set()).add(c["document"])
    assert set(named) <= texts and len(named) > 100
    names = [next(iter(n)) for n in named.values()]
    assert all(len(n) == 1 for n in named.values()) and len(set(names)) == len(names)
    assert all(n.startswith("wiki-qa/passage-") for n in names)
    # a passage with a name keeps it
    own = [{"id": "x", "app": "wiki-qa", "contexts": [{"text": "t", "document": "mine.md"}, "u"]}]
    line = simulate(own, 1, days=1, seed=1).lines[0]
    assert [c.get("document") for c in json.loads(line)["contexts"]] == ["mine.md", "wiki-qa/passage-001"]
