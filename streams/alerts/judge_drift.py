"""Judge-drift alerts: rules on the judge's agreement with people's labels (``judge_balanced_accuracy``,
``judge_sensitivity``, ``judge_specificity``, ``judge_kappa``), so a judge whose provider changed the
model, or a new prompt, pages when it starts disagreeing with reviewers.

A rule on such a metric is looked at whenever a window of its app/model closes, like any rule, but its
value is not the windows': it is the agreement (``pipeline.judge_quality``, weighted as the Judge quality
page weighs it) over the last ``labels`` labeled interactions judged before that window's end, on the
rule's ``label_kind``. A baseline rule compares it with the ``baseline_labels`` labeled interactions
before those; the fall is significant when it exceeds ``z_critical(confidence)`` standard errors, each
taken from its estimate's 95 % bootstrap interval (resampled by conversation), and is at least
``min_effect``. ``min_interactions`` (and ``min_baseline_interactions``) count labeled interactions.
``for_windows`` and ``resolve_for`` count closed windows, each a new look at the labels (as of its end),
so every worker decides the same transition with the same id.

The alert's message names the judge, its model and its prompt version: those of the newest labeled
interaction, and how many identities the labels span when a judge changed among them.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.judge_quality import CorrectThreshold, identity, judge_quality
from pipeline.metrics.agreement import Estimate
from pipeline.metrics.wilson import Z95
from schemas.alert import Alert, AlertRule, BaselineRule
from schemas.label import LabeledRow
from schemas.metrics import AGREEMENT_BY_NAME
from streams.alerts.lifecycle import OPS, Rule, alert_id
from streams.alerts.stats import z_critical

#: the labeled rows of the last ``n`` labeled interactions of (app, model, kind) before a time, newest first;
#: the flag: whether end users' labels count (else people's only)
LatestLabeled = Callable[[str, str, str, datetime, int, bool], Awaitable[list[LabeledRow]]]


@dataclass(frozen=True)
class Sample:
    """The judge's agreement over some labeled interactions."""

    estimate: Estimate
    cases: int  # labeled interactions that counted (ties and no-verdicts left out)
    judge: str = ""  # the newest labeled interaction's judge identity
    judge_model: str = ""
    prompt_version: str = ""
    identities: int = 0  # judge identities among the labels

    @property
    def value(self) -> float | None:
        return self.estimate.value

    @property
    def standard_error(self) -> float | None:
        e = self.estimate
        if e.low is None or e.high is None:
            return None
        return (e.high - e.low) / (2 * Z95)

    def names(self) -> str:
        model, prompt = self.judge_model or "-", self.prompt_version or "-"
        judge = f"the {self.judge or '?'} judge (model {model}, prompt {prompt})"
        return (
            judge if self.identities <= 1 else f"{judge}; the labels span {self.identities} judge identities"
        )


EMPTY = Sample(Estimate(), 0)


def newest_first(rows: Sequence[LabeledRow]) -> list[list[LabeledRow]]:
    """Rows grouped by interaction, in the order given (newest first)."""
    groups: dict[str, list[LabeledRow]] = {}
    for row in rows:
        groups.setdefault(row.interaction_id, []).append(row)
    return list(groups.values())


def sample(
    metric: str,
    interactions: Sequence[Sequence[LabeledRow]],
    kind: str,
    correct_threshold: CorrectThreshold,
    *,
    include_end_user: bool = False,
    resamples: int = 1000,
) -> Sample:
    """The agreement ``metric`` names over these labeled interactions (newest first)."""
    rows = [r for group in interactions for r in group if r.kind == kind]
    if not rows:
        return EMPTY
    blocks = judge_quality(
        rows, correct_threshold, per_identity=False, include_end_user=include_end_user, resamples=resamples
    )
    agreement = blocks[0].agreement if blocks else None
    if agreement is None:
        return EMPTY
    judge, judge_model, prompt_version = identity(rows[0])  # the newest's
    return Sample(
        estimate=getattr(agreement, AGREEMENT_BY_NAME[metric].field),
        cases=agreement.cases,
        judge=judge,
        judge_model=judge_model,
        prompt_version=prompt_version,
        identities=len({identity(r) for r in rows}),
    )


@dataclass(frozen=True)
class DriftCheck:
    """One look at the labels, as of one window's end: in breach, back, or neither."""

    end: datetime
    breach: bool
    back: bool
    current: Sample
    baseline: Sample | None = None
    z: float = 0.0


def threshold_check(rule: AlertRule, end: datetime, current: Sample) -> DriftCheck:
    value = current.value
    if value is None or current.cases < rule.min_interactions:
        return DriftCheck(end, False, False, current)
    h = rule.hysteresis
    back = value <= rule.threshold - h if rule.op in (">", ">=") else value >= rule.threshold + h
    return DriftCheck(end, OPS[rule.op](value, rule.threshold), back, current)


def baseline_check(
    rule: BaselineRule, end: datetime, current: Sample, baseline: Sample, frozen: float | None
) -> DriftCheck:
    """The current labels against the ones before them (fire side), or against the ``frozen`` baseline
    of an open alert (resolve side)."""
    value, sign = current.value, 1.0 if rule.bad_direction == "up" else -1.0
    if value is None or current.cases < rule.min_interactions:
        return DriftCheck(end, False, False, current, baseline)
    back = frozen is not None and sign * (value - frozen) < rule.resolve_below
    base = baseline.value
    se_now, se_base = current.standard_error, baseline.standard_error
    if base is None or baseline.cases < rule.min_baseline_interactions or se_now is None or se_base is None:
        return DriftCheck(end, False, back, current, baseline)
    change = sign * (value - base)
    spread = math.hypot(se_now, se_base)
    z = change / spread if spread > 0 else (math.inf if change > 0 else 0.0)
    breach = z >= z_critical(rule.confidence) and change >= rule.min_effect
    return DriftCheck(end, breach, back, current, baseline, z)


class JudgeDrift:
    """Reads the labels for a judge rule and decides its transition (the engine calls ``decide``)."""

    def __init__(
        self,
        latest: LatestLabeled,
        correct_threshold: CorrectThreshold,
        *,
        include_end_user: bool = False,
        resamples: int = 1000,
    ) -> None:
        self.latest = latest
        self.correct_threshold = correct_threshold
        self.include_end_user = include_end_user
        self.resamples = resamples

    def _sample(self, rule: Rule, interactions: Sequence[Sequence[LabeledRow]]) -> Sample:
        return sample(
            rule.metric, interactions, rule.label_kind, self.correct_threshold,
            include_end_user=self.include_end_user, resamples=self.resamples,
        )  # fmt: skip

    async def check(
        self, rule: Rule, app: str, model: str, end: datetime, frozen: float | None
    ) -> DriftCheck:
        """The rule's check on the labels of interactions judged before ``end``."""
        extra = rule.baseline_labels if isinstance(rule, BaselineRule) else 0
        rows = await self.latest(app, model, rule.label_kind, end, rule.labels + extra, self.include_end_user)
        groups = newest_first(rows)
        current = self._sample(rule, groups[: rule.labels])
        if isinstance(rule, BaselineRule):
            return baseline_check(rule, end, current, self._sample(rule, groups[rule.labels :]), frozen)
        return threshold_check(rule, end, current)

    async def decide(
        self, rule: Rule, app: str, model: str, window_end: datetime, window_size: timedelta,
        open_alert: Alert | None, last_fired_end: datetime | None, now: datetime,
    ) -> Alert | None:  # fmt: skip
        """The transition after the window ending at ``window_end`` closed (module docstring), or None."""
        if open_alert is not None:
            started = open_alert.starts_at or open_alert.window_end
            ends = [window_end - i * window_size for i in reversed(range(rule.resolve_for))]
            if ends[0] <= started:
                return None
            checks = [await self.check(rule, app, model, e, open_alert.baseline) for e in ends]
            if not all(c.back for c in checks):
                return None
            return resolved(open_alert, checks[-1], window_size, now)
        if last_fired_end is not None and (
            window_end <= last_fired_end
            or window_end - last_fired_end < timedelta(seconds=rule.cooldown_seconds)
        ):
            return None
        ends = [window_end - i * window_size for i in reversed(range(rule.for_windows))]
        checks = [await self.check(rule, app, model, e, None) for e in ends]
        if not all(c.breach for c in checks):
            return None
        return firing(rule, app, model, checks[-1], window_size, now)


def firing(
    rule: Rule, app: str, model: str, check: DriftCheck, window_size: timedelta, now: datetime
) -> Alert:
    current = check.current
    value = current.value if current.value is not None else float("nan")
    start = check.end - window_size
    aid = alert_id(rule, app, model, start)
    common = {
        "alert_id": aid, "incident_id": aid, "rule": rule.name, "metric": rule.metric, "app": app,
        "model": model, "value": value, "windows": 1, "interactions": current.cases,
        "window_start": start, "window_end": check.end, "fired_at": now, "state": "firing",
        "kind": rule.kind, "starts_at": check.end, "severity": rule.severity,
    }  # fmt: skip
    what = (
        f"{rule.metric} of {current.names()} on {app}/{model} ({rule.label_kind} labels, the last "
        f"{current.cases} labeled interactions judged before {check.end:%Y-%m-%d %H:%M:%S} UTC)"
    )
    if isinstance(rule, AlertRule):
        message = f"[groundwatch] {rule.name}: {what} is {value:.3f} ({rule.op} {rule.threshold})"
        return Alert(**common, threshold=rule.threshold, op=rule.op, message=message)
    base = (
        check.baseline.value if check.baseline is not None and check.baseline.value is not None else math.nan
    )
    base_n = check.baseline.cases if check.baseline is not None else 0
    up = rule.bad_direction == "up"
    message = (
        f"[groundwatch] FIRING {rule.name}: {what} is {value:.3f} against {base:.3f} on the {base_n} "
        f"labeled interactions before them ({(value - base) * 100:+.1f} points, z={check.z:.2f}, "
        f"{rule.confidence:.1%} one-sided)"
    )
    return Alert(
        **common, threshold=base + (rule.min_effect if up else -rule.min_effect), op=">" if up else "<",
        baseline=base, baseline_interactions=base_n, message=message,
    )  # fmt: skip


def resolved(open_alert: Alert, check: DriftCheck, window_size: timedelta, now: datetime) -> Alert:
    current = check.current
    value = current.value if current.value is not None else float("nan")
    against = (
        f"baseline {open_alert.baseline:.3f}"
        if open_alert.baseline is not None
        else f"{open_alert.op} {open_alert.threshold}"
    )
    message = (
        f"[groundwatch] RESOLVED {open_alert.rule}: {open_alert.metric} of {current.names()} on "
        f"{open_alert.app}/{open_alert.model} is back at {value:.3f} ({against}) over the last "
        f"{current.cases} labeled interactions, firing since "
        f"{open_alert.starts_at or open_alert.window_end:%Y-%m-%d %H:%M:%S} UTC, resolved at "
        f"{check.end:%Y-%m-%d %H:%M:%S} UTC"
    )
    return open_alert.model_copy(
        update={
            "alert_id": f"{open_alert.incident}|resolved", "incident_id": open_alert.incident,
            "state": "resolved", "value": value, "interactions": current.cases,
            "window_start": check.end - window_size, "window_end": check.end, "fired_at": now,
            "starts_at": open_alert.starts_at or open_alert.window_end, "ends_at": check.end,
            "message": message,
        }
    )  # fmt: skip
