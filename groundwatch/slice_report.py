"""`groundwatch report --by DIMENSION [--compare-to AGO]`: a metric per slice over a period and, compared
with the same period ``AGO`` earlier, each slice's contribution to the change (streams/slices.py)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from groundwatch.figures import defined
from groundwatch.trend_report import parse_duration
from schemas.errors import ConfigError
from schemas.metrics import MetricKind, catalogue, metric_named
from schemas.safe_text import safe_text
from schemas.settings import Settings
from schemas.slices import Breakdown, BreakdownQuery, ChangesQuery, WhatChanged
from schemas.validation import describe_validation_error


def parse_ago(text: str, flag: str) -> timedelta:
    span = parse_duration(text)
    if span is None or not span:
        raise ConfigError(f"{flag}: expected a duration such as 30m, 24h or 7d, got {text!r}")
    return span


def _value(kind: str, value: float | None) -> str:
    v = defined(value)
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" if kind == MetricKind.RATE.value else f"{v:.3f}" if kind == "mean" else f"{v:g}"


def _points(kind: str, value: float | None) -> str:
    v = defined(value)
    if v is None:
        return "-"
    return f"{100 * v:+.1f} pt" if kind == MetricKind.RATE.value else f"{v:+.3f}"


def render_breakdown(b: Breakdown) -> str:
    lines = [
        f"{b.metric} by {b.dimension}, {b.period.start:%Y-%m-%d %H:%M} - {b.period.end:%Y-%m-%d %H:%M} UTC: "
        f"{_value(b.kind, b.period.value)} over {b.period.interactions} interactions",
        f"{'slice':<32} {'value':>8} {'95% interval':>17} {'n':>7} {'share':>7}",
    ]
    for s in b.slices:
        interval = f"[{_value(b.kind, s.lower)}, {_value(b.kind, s.upper)}]" if s.lower is not None else ""
        lines.append(
            f"{safe_text(s.value)[:32]:<32} {_value(b.kind, s.metric):>8} {interval:>17} {s.n:>7} "
            f"{100 * s.share:>6.1f}%"
        )
    return "\n".join(lines)


def render_changes(w: WhatChanged) -> str:
    span = "%Y-%m-%d %H:%M"
    lines = [
        f"what changed in {w.metric} by {w.dimension}: {_value(w.kind, w.baseline.value)} "
        f"({w.baseline.start:{span}} - {w.baseline.end:{span}}, {w.baseline.interactions}) -> "
        f"{_value(w.kind, w.current.value)} ({w.current.start:{span}} - {w.current.end:{span}}, "
        f"{w.current.interactions}): {_points(w.kind, w.change)}",
        f"{'slice':<32} {'before':>8} {'after':>8} {'share':>15} {'mix':>9} {'rate':>9} {'contribution':>13}",
    ]
    for c in w.contributions:
        share = f"{100 * c.baseline_share:.0f}% -> {100 * c.current_share:.0f}%"
        lines.append(
            f"{safe_text(c.value)[:32]:<32} {_value(w.kind, c.baseline):>8} {_value(w.kind, c.current):>8} "
            f"{share:>15} {_points(w.kind, c.mix):>9} {_points(w.kind, c.rate):>9} "
            f"{_points(w.kind, c.contribution):>13}"
        )
    return "\n".join(lines)


def run_by(args: argparse.Namespace, settings: Settings, now: datetime | None = None) -> int:
    from groundwatch.store_access import open_store, read_failed
    from groundwatch.trend_report import parse_since
    from streams.clickhouse.slices import SliceReader
    from streams.slices import read_breakdown, read_changes

    if args.by is None:
        raise ConfigError("--compare-to goes with --by DIMENSION")
    metric = args.metric or "hallucination_rate"
    if metric_named(metric) is None:
        raise ConfigError(f"--metric: not a metric; one of {', '.join(m.name for m in catalogue())}")
    end = now or datetime.now(UTC)
    start = parse_since(args.since or "7d", end)
    assert start is not None
    common = {
        "start": start, "end": end, "metric": metric, "dimension": args.by, "app": args.app,
        "models": [args.model] if args.model else [],
    }  # fmt: skip
    try:
        if args.compare_to is not None:
            ago = parse_ago(args.compare_to, "--compare-to")
            query: BreakdownQuery = ChangesQuery(**common, baseline_start=start - ago, baseline_end=end - ago)
        else:
            query = BreakdownQuery(**common)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None
    store = open_store(settings, migrate=False)
    try:
        reader = SliceReader(store)
        first = query.baseline_start if isinstance(query, ChangesQuery) else start
        stored = asyncio.run(reader.dimensions(min(first, start), end))
    except Exception as exc:  # read-only: a database the worker never set up has no tables
        store.close()
        raise read_failed(settings, exc) from None
    known = [*settings.dimensions.names, *(d for d in stored if d not in settings.dimensions.names)]
    if args.by not in known:
        store.close()
        raise ConfigError(f"--by: {args.by!r} is not a dimension; one of {', '.join(known)}")
    try:
        if isinstance(query, ChangesQuery):
            changes = asyncio.run(read_changes(reader, query))
            text = changes.model_dump_json(indent=2) if args.json else render_changes(changes)
        else:
            table = asyncio.run(read_breakdown(reader, query))
            text = table.model_dump_json(indent=2) if args.json else render_breakdown(table)
    except Exception as exc:  # read-only: a database the worker never set up has no tables
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    print(text)
    return 0
