"""Trend tables per app/model from window_aggregates and alerts (plain text or JSON)."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from schemas.alert import Alert
from schemas.metrics import METRICS_BY_NAME, pooled
from schemas.safe_text import safe_text
from schemas.window import WindowAggregate

_AGO = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``30m``, ``2h``, ``7d`` (ago) or an ISO time (UTC when it has no zone); None for everything."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    m = _AGO.match(text.strip())
    if m:
        return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        ts = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"--since: expected e.g. 30m, 2h, 7d or an ISO time, got {text!r}") from exc
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


class Report(BaseModel):
    counts: dict[str, int]
    windows: list[WindowAggregate]
    alerts: list[Alert]


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render(report: Report) -> str:
    """The report as text; app and model names and alert messages are shown escaped (one line each,
    no terminal control sequences: ``schemas.safe_text``), while stored values stay as sent."""
    lines = [
        "rows: " + ", ".join(f"{k} {v}" for k, v in report.counts.items()),
    ]
    groups: dict[tuple[str, str], list[WindowAggregate]] = defaultdict(list)
    for w in report.windows:
        groups[(w.app, w.model)].append(w)
    header = (
        f"{'window start (UTC)':<20} {'n':>5} {'judged':>6} {'ctx':>6} {'gt=>a':>6} {'a=>gt':>6} "
        f"{'halluc':>7} {'refusal':>8} {'gt ref':>7} {'tokens':>8} {'cost $':>9} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'incomp':>6}"
    )
    for (app, model), windows in sorted(groups.items()):
        total = sum(w.count for w in windows)
        judged = sum(w.judged for w in windows)
        halluc = pooled(METRICS_BY_NAME["hallucination_rate"], windows)
        refusal = pooled(METRICS_BY_NAME["answer_refusal_rate"], windows)
        lines += [
            "",
            f"== {safe_text(app)} / {safe_text(model)}: {total} interactions ({judged} judged) in "
            f"{len(windows)} windows, hallucination rate {_pct(halluc)}, "
            f"answer refusal rate {_pct(refusal)} ==",
            header,
        ]
        for w in sorted(windows, key=lambda w: w.window_start):
            lines.append(
                f"{w.window_start:%Y-%m-%d %H:%M:%S} {w.count:>5} {w.judged:>6} "
                f"{_f(w.mean_context_entailment):>6} {_f(w.mean_ground_truth_entails_answer):>6} "
                f"{_f(w.mean_answer_entails_ground_truth):>6} "
                f"{_pct(w.hallucination_rate):>7} {_pct(w.answer_refusal_rate):>8} "
                f"{_pct(w.ground_truth_refusal_rate):>7} {w.input_tokens + w.output_tokens:>8} "
                f"{w.cost_usd:>9.4f} {_f(w.judge_latency_p50_ms, 1):>8} {_f(w.judge_latency_p95_ms, 1):>8} "
                f"{w.incomplete:>6}"
            )
    lines += ["", f"alerts: {len(report.alerts)}"]
    for a in report.alerts:
        lines.append(f"  {a.fired_at:%Y-%m-%d %H:%M:%S} {safe_text(a.message)}")
    return "\n".join(lines)
