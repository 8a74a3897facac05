"""The alert lifecycle of one rule on one app/model, pure: given the recent windows and the open alert
(if any), the transition to make now: fire, resolve, or nothing.

The engine (streams.alerts.engine) reads the windows and the open alert from ClickHouse; the benchmark
(benchmarks/alerts.py) simulates them; both call ``decide``. Every worker that sees the same windows
decides the same transition with the same id.

- Fire (no open alert): the last ``for_windows`` windows are each in breach (a threshold rule: the
  metric pooled over ``windows`` windows crosses the threshold; a baseline rule: the change against the
  baseline, the ``baseline_windows`` windows before the first of those, is significant and at least
  ``min_effect``), each with ``min_interactions`` behind it, and ``cooldown_seconds`` of event time have
  passed since the previous firing.
- Resolve (an open alert): the last ``resolve_for`` windows after it fired are each back: a threshold
  rule ``hysteresis`` inside the threshold, a baseline rule less than ``resolve_effect`` away from the
  baseline frozen when it fired (a trailing baseline would otherwise absorb the drift and "resolve" it).
  A window with too few interactions is neither in breach nor back: the state holds.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.alert import Alert, AlertRule, BaselineRule
from schemas.metrics import Over, metric_named
from streams.alerts.stats import Obs, pool, significant

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
Rule = AlertRule | BaselineRule


@dataclass(frozen=True)
class Slot:
    """One window of one app/model (an empty one has ``Obs(0, 0)``)."""

    start: datetime
    end: datetime
    obs: Obs


@dataclass(frozen=True)
class Check:
    """One window's verdict: in breach (fire side), back (resolve side), or neither."""

    breach: bool
    back: bool
    value: float | None
    support: int
    start: datetime  # the span of the pooled current window(s)
    end: datetime
    baseline: Obs | None = None
    z: float = 0.0


def history_needed(rule: Rule) -> int:
    """How many windows (ending with the current one) ``decide`` reads."""
    steps = max(rule.for_windows, rule.resolve_for) + rule.windows - 1
    return steps + (rule.baseline_windows if isinstance(rule, BaselineRule) else 0)


def alert_id(rule: Rule, app: str, model: str, window_start: datetime, slice_: str = "") -> str:
    """Deterministic: the same rule on the same window (and slice) fires (at most) once, whoever
    evaluates it."""
    aid = f"{rule.name}|{app}|{model}|{window_start.strftime('%Y-%m-%dT%H:%M:%S')}"
    return f"{aid}|{slice_}" if slice_ else aid


def time_span(start: datetime, end: datetime) -> str:
    """``2026-11-22 06:00:00-12:00:00 UTC``; the end's date too when it is another day's."""
    until = f"{end:%H:%M:%S}" if end.date() == start.date() else f"{end:%Y-%m-%d %H:%M:%S}"
    return f"{start:%Y-%m-%d %H:%M:%S}-{until} UTC"


def counted(metric: str, n: int) -> str:
    """``18 conversations`` for a metric over conversations, else ``18 interactions``."""
    known = metric_named(metric)
    unit = "conversations" if known is not None and known.over is Over.CONVERSATION else "interactions"
    return f"{n} {unit}"


def _series(app: str, model: str, slice_: str) -> str:
    """How a message names what the alert is about: ``app/model``, with its slice in brackets."""
    return f"{app}/{model} [{slice_}]" if slice_ else f"{app}/{model}"


def current(rule: Rule, slots: Sequence[Slot], i: int) -> tuple[Obs, datetime, datetime]:
    first = max(0, i - rule.windows + 1)
    return pool(s.obs for s in slots[first : i + 1]), slots[first].start, slots[i].end


def threshold_check(rule: AlertRule, slots: Sequence[Slot], i: int) -> Check:
    obs, start, end = current(rule, slots, i)
    value = obs.value
    if value is None or obs.n < rule.min_interactions:
        return Check(False, False, value, obs.n, start, end)
    h = rule.hysteresis
    back = value <= rule.threshold - h if rule.op in (">", ">=") else value >= rule.threshold + h
    return Check(OPS[rule.op](value, rule.threshold), back, value, obs.n, start, end)


def baseline_check(
    rule: BaselineRule, slots: Sequence[Slot], i: int, base_end: int, frozen: float | None
) -> Check:
    """Window ``i`` against the baseline of the ``baseline_windows`` slots before index ``base_end``
    (fire side), or against the ``frozen`` baseline of an open alert (resolve side)."""
    obs, start, end = current(rule, slots, i)
    base_slots = [s.obs for s in slots[max(0, base_end - rule.baseline_windows) : base_end]]
    base = pool(base_slots)
    value, sign = obs.value, 1.0 if rule.bad_direction == "up" else -1.0
    if value is None or obs.n < rule.min_interactions:
        return Check(False, False, value, obs.n, start, end, base)
    back = frozen is not None and sign * (value - frozen) < rule.resolve_below
    if base.n < rule.min_baseline_interactions or base.value is None:
        return Check(False, back, value, obs.n, start, end, base)
    up = rule.bad_direction == "up"
    sig, z = significant(rule.metric, obs, base, base_slots, rule.confidence, up)
    breach = sig and sign * (value - base.value) >= rule.min_effect
    return Check(breach, back, value, obs.n, start, end, base, z)


def decide(
    rule: Rule, app: str, model: str, slots: Sequence[Slot], open_alert: Alert | None,
    last_fired_end: datetime | None, now: datetime, slice_: str = "",
) -> Alert | None:  # fmt: skip
    """The transition to make after the last slot closed (module docstring), or None; ``slice_`` names
    the slice the slots are of (a rule with group_by)."""
    if not slots:
        return None
    if open_alert is not None:
        return _maybe_resolve(rule, app, model, slots, open_alert, now)
    last = slots[-1]
    if last_fired_end is not None and (
        last.end <= last_fired_end or last.end - last_fired_end < timedelta(seconds=rule.cooldown_seconds)
    ):
        return None
    steps = range(len(slots) - rule.for_windows, len(slots))
    if steps.start < 0:
        return None
    checks = [_check(rule, slots, i, steps.start - rule.windows + 1, None) for i in steps]
    if not all(c.breach for c in checks):
        return None
    return firing(rule, app, model, last, checks[-1], now, slice_)


def _check(rule: Rule, slots: Sequence[Slot], i: int, base_end: int, frozen: float | None) -> Check:
    if isinstance(rule, BaselineRule):
        return baseline_check(rule, slots, i, base_end, frozen)
    return threshold_check(rule, slots, i)


def _maybe_resolve(
    rule: Rule, app: str, model: str, slots: Sequence[Slot], open_alert: Alert, now: datetime
) -> Alert | None:
    started = open_alert.starts_at or open_alert.window_end
    after = [i for i, s in enumerate(slots) if s.end > started][-rule.resolve_for :]
    if len(after) < rule.resolve_for:
        return None
    checks = [_check(rule, slots, i, 0, open_alert.baseline) for i in after]
    if not all(c.back for c in checks):
        return None
    return resolved(open_alert, slots[-1], checks[-1], now)


def firing(
    rule: Rule, app: str, model: str, last: Slot, check: Check, now: datetime, slice_: str = ""
) -> Alert:
    value = check.value if check.value is not None else float("nan")
    aid = alert_id(rule, app, model, last.start, slice_)
    series = _series(app, model, slice_)
    common = {
        "alert_id": aid, "incident_id": aid, "rule": rule.name, "metric": rule.metric, "app": app,
        "model": model, "value": value, "windows": rule.windows, "interactions": check.support,
        "window_start": check.start, "window_end": check.end, "fired_at": now, "state": "firing",
        "kind": rule.kind, "starts_at": last.end, "severity": rule.severity, "slice": slice_,
    }  # fmt: skip
    span = time_span(check.start, check.end)
    if isinstance(rule, AlertRule):
        message = (
            f"[groundwatch] {rule.name}: {rule.metric} of {series} is {value:.3f} "
            f"({rule.op} {rule.threshold}) over the last {rule.windows} window(s), "
            f"{counted(rule.metric, check.support)}, {span}"
        )
        return Alert(**common, threshold=rule.threshold, op=rule.op, message=message)
    base = check.baseline.value if check.baseline is not None else None
    base_n = check.baseline.n if check.baseline is not None else 0
    up = rule.bad_direction == "up"
    b = base if base is not None else float("nan")
    message = (
        f"[groundwatch] FIRING {rule.name}: {rule.metric} of {series} is {value:.3f} against its "
        f"baseline {b:.3f} ({(value - b) * 100:+.1f} points, z={check.z:.2f}, {rule.confidence:.1%} "
        f"one-sided) over the last {rule.windows} window(s), {counted(rule.metric, check.support)}; baseline "
        f"{rule.baseline_windows} windows, {counted(rule.metric, base_n)}; {span}"
    )
    return Alert(
        **common, threshold=b + (rule.min_effect if up else -rule.min_effect), op=">" if up else "<",
        baseline=base, baseline_interactions=base_n, message=message,
    )  # fmt: skip


def resolved(open_alert: Alert, last: Slot, check: Check, now: datetime) -> Alert:
    value = check.value if check.value is not None else float("nan")
    against = (
        f"baseline {open_alert.baseline:.3f}"
        if open_alert.baseline is not None
        else f"{open_alert.op} {open_alert.threshold}"
    )
    message = (
        f"[groundwatch] RESOLVED {open_alert.rule}: {open_alert.metric} of "
        f"{_series(open_alert.app, open_alert.model, open_alert.slice)} is back at {value:.3f} ({against}), "
        "firing since "
        f"{open_alert.starts_at or open_alert.window_end:%Y-%m-%d %H:%M:%S} UTC, resolved at "
        f"{last.end:%Y-%m-%d %H:%M:%S} UTC"
    )
    return open_alert.model_copy(
        update={
            "alert_id": f"{open_alert.incident}|resolved", "incident_id": open_alert.incident,
            "state": "resolved", "value": value, "interactions": check.support,
            "window_start": check.start, "window_end": check.end, "fired_at": now,
            "starts_at": open_alert.starts_at or open_alert.window_end, "ends_at": last.end,
            "message": message,
        }
    )  # fmt: skip
