"""Trend tables per app/model from window_aggregates and alerts (plain text or JSON)."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from groundwatch.figures import defined, fixed
from schemas.alert import Alert
from schemas.errors import ConfigError
from schemas.metrics import Metric, MetricKind, catalogue, pooled
from schemas.safe_text import safe_text
from schemas.utc import utc
from schemas.window import WindowAggregate

_AGO = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(text: str) -> timedelta | None:
    """``30s``, ``30m``, ``2h`` or ``7d`` as a duration; None when the text is not one."""
    m = _AGO.match(text.strip())
    return timedelta(**{_UNITS[m.group(2)]: int(m.group(1))}) if m else None


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``30m``, ``2h``, ``7d`` (ago) or an ISO time (UTC when it has no zone); None for everything; a
    ConfigError (one line) for anything else."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    span = parse_duration(text)
    if span is not None:
        return now - span
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--since: expected e.g. 30m, 2h, 7d or an ISO time, got {text!r}") from None
    return utc(ts)


def since_range(text: str | None) -> tuple[datetime, datetime]:
    """[start, end) of a command's ``--since``: from that time (everything without it) to a day past now
    (timestamps may run a little ahead of this clock)."""
    now = datetime.now(UTC)
    return parse_since(text, now) or datetime(1971, 1, 1, tzinfo=UTC), now + timedelta(days=1)


class Report(BaseModel):
    counts: dict[str, int]
    windows: list[WindowAggregate]
    alerts: list[Alert]


def _f(value: float | None, digits: int = 3) -> str:
    return fixed(value, digits)


def _pct(value: float | None) -> str:
    shown = defined(value)
    return "-" if shown is None else f"{100 * shown:.1f}%"


def figure(metric: Metric, value: float | None) -> str:
    """One metric's value as the report prints it: a rate in per cent, a mean to 3 places, a total as a
    whole number (a cost in dollars to 4 places)."""
    if metric.kind is MetricKind.RATE:
        return _pct(value)
    if metric.kind is MetricKind.MEAN:
        return _f(value)
    if defined(value) is None:
        return "-"
    return f"{value:.4f}" if metric.unit == "USD" else f"{value:.0f}"


def _width(metric: Metric) -> int:
    return max(len(metric.short), 9 if metric.unit == "USD" else 7)


def render(report: Report, *, every_window: bool = True) -> str:
    """The report as text: per app/model, each rate pooled over the range (those without a case are
    counted, not listed), then (``every_window``) a row per window with every metric of the catalogue
    (schemas.metrics) and the judge's latency. App and model names and alert messages are shown escaped
    (one line each, no terminal control sequences: ``schemas.safe_text``), while stored values stay as
    sent."""
    lines = [
        "rows: " + ", ".join(f"{k} {v}" for k, v in report.counts.items()),
    ]
    groups: dict[tuple[str, str], list[WindowAggregate]] = defaultdict(list)
    for w in report.windows:
        groups[(w.app, w.model)].append(w)
    # a custom evaluator's missing scores are a total in the summary line, not a column of their own
    columns = [m for m in catalogue() if not (m.custom_key and m.kind is MetricKind.SUM)]
    missing = [m for m in catalogue() if m.custom_key and m.kind is MetricKind.SUM]
    header = (
        f"{'window start (UTC)':<20}"
        + "".join(f" {m.short:>{_width(m)}}" for m in columns)
        + f" {'p50 ms':>8} {'p95 ms':>8}"
    )
    rates = [
        m for m in catalogue() if m.kind is MetricKind.RATE or (m.custom_key and m.kind is MetricKind.MEAN)
    ]
    for (app, model), windows in sorted(groups.items()):
        total = sum(w.count for w in windows)
        judged = sum(w.judged for w in windows)
        values = [(m, pooled(m, windows)) for m in rates]
        summary = ", ".join(f"{m.label.lower()} {figure(m, v)}" for m, v in values if v is not None)
        summary += "".join(
            f", {m.label.lower()} {int(n)}" for m in missing if (n := pooled(m, windows) or 0) > 0
        )
        if undefined := sum(v is None for _, v in values):  # no case in the range: the table shows "-"
            summary += f"{', ' if summary else ''}{undefined} rates without a case"
        lines += [
            "",
            f"== {safe_text(app)} / {safe_text(model)}: {total} interactions ({judged} judged) in "
            f"{len(windows)} windows, {summary} ==",
        ]
        if not every_window:
            continue
        lines.append(header)
        for w in sorted(windows, key=lambda w: w.window_start):
            lines.append(
                f"{w.window_start:%Y-%m-%d %H:%M:%S} "
                + "".join(f" {figure(m, pooled(m, [w])):>{_width(m)}}" for m in columns)
                + f" {_f(w.judge_latency_p50_ms, 1):>8} {_f(w.judge_latency_p95_ms, 1):>8}"
            )
    lines += ["", f"alerts: {len(report.alerts)}"]
    for a in report.alerts:
        lines.append(f"  {a.fired_at:%Y-%m-%d %H:%M:%S} {safe_text(a.message)}")
    return "\n".join(lines)
