"""Alert rules and receivers (from a config file) and the alert transitions they produce.

Two rule kinds (``kind:``, default ``threshold`` so older rule files keep working):

- ``threshold``: the metric over the pooled last ``windows`` windows crosses a fixed threshold, on
  ``for_windows`` consecutive windows, each with at least ``min_interactions`` behind it;
- ``baseline``: the metric over the current ``windows`` window(s) against a trailing baseline of the same
  app/model (the ``baseline_windows`` windows before them), firing when the change is statistically
  significant at ``confidence`` (one-sided) and at least ``min_effect`` in the rule's direction.

Both fire once (state ``firing``) and resolve once (state ``resolved``) when the metric is back, with
hysteresis (docs/alerts.md). Each transition is one ``Alert``: a row in ``alerts``, an event on the
alerts topic and one notification per receiver.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from schemas.evaluators import CUSTOM_PREFIX
from schemas.label_kinds import AnyLabelKind, LabelKind
from schemas.metrics import (
    AGREEMENT_BY_NAME,
    ALERT_METRICS,
    MetricKind,
    alert_metric_names,
    custom_metrics,
    higher_is_bad,
    metric_named,
)
from schemas.slice_filter import check_dimension
from schemas.utc import utc

#: a rule on one of these metrics watches every evaluator of the evaluators file: it becomes one rule per
#: evaluator on ``custom.<name>.missing`` (``.coverage``), named ``<rule>.<name>``, when the rules are read
#: (``AlertRules``)
EVERY_EVALUATOR = {"custom.*.missing": ".missing", "custom.*.coverage": ".coverage"}


def _alertable(name: str) -> str:
    known = alert_metric_names()
    if name in known or name in EVERY_EVALUATOR:
        return name
    if name.startswith(CUSTOM_PREFIX):
        mine = [m.name for m in custom_metrics()]
        raise ValueError(
            f"{name}: no such metric of the evaluators file (GROUNDWATCH_EVALUATORS__FILE): "
            + (f"its metrics are {', '.join(mine)}" if mine else "none is loaded, or it declares none")
        )
    raise ValueError(f"unknown metric {name!r}: one of {', '.join(known)}")


#: a custom evaluator's metric name: custom.<name>, custom.<name>.missing or custom.<name>.coverage
#: (schemas.evaluators)
CUSTOM_METRIC_PATTERN = r"^custom\.[a-z][a-z0-9_]{0,47}(\.missing|\.coverage)?$"

#: a metric of the catalogue (schemas.metrics) or of the judge's agreement with people's labels; a custom
#: evaluator's (custom.<name>, custom.<name>.missing) once the evaluators file is loaded: the JSON schema
#: takes any such name, the rules file is checked against the evaluators file when the worker starts
AlertMetric = Annotated[
    str,
    AfterValidator(_alertable),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "enum": [*ALERT_METRICS, *EVERY_EVALUATOR]},
                {"type": "string", "pattern": CUSTOM_METRIC_PATTERN},
            ],
            "description": "a metric of the catalogue or of the judge's agreement, or custom.<name> "
            "(custom.<name>.missing, custom.<name>.coverage) of an evaluator in "
            "GROUNDWATCH_EVALUATORS__FILE; custom.*.missing, custom.*.coverage: each evaluator's missing "
            "scores or coverage, one rule per evaluator",
        }
    ),
]
Severity = Literal["info", "warning", "critical"]


class _RuleBase(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    metric: AlertMetric
    windows: int = Field(3, ge=1, description="the last K closed windows, pooled, are the current value")
    # interactions carrying the metric (its denominator: answered ones for the hallucination rate, known
    # flags for a refusal rate, scored ones for a mean), pooled, needed before a window counts at all
    min_interactions: int = Field(20, ge=1)
    for_windows: int = Field(1, ge=1, alias="for", description="consecutive windows in breach to fire")
    resolve_for: int = Field(2, ge=1, description="consecutive windows back to normal to resolve")
    cooldown_seconds: int = Field(900, ge=0, description="event time between two firings, at least")
    severity: Severity = "warning"
    app: str | None = None  # None: every app
    model: str | None = None  # None: every model
    group_by: list[str] = Field(
        default_factory=list,
        max_length=3,
        description="dimensions (dimensions.paths or built-ins): the rule is evaluated per value, each "
        "with its own min_interactions, and an alert names its slice",
    )

    @field_validator("group_by")
    @classmethod
    def _dimensions(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a dimension is given twice")
        return [check_dimension(v) for v in value]

    # a judge agreement metric (judge_balanced_accuracy, ...) is computed over the last ``labels``
    # labeled interactions of the label kind; windows, for_windows and resolve_for still count closed
    # windows (each one is a new look at the labels), min_interactions counts labeled interactions
    labels: int = Field(200, ge=1, description="judge metrics: the last N labeled interactions")
    label_kind: AnyLabelKind = Field(
        LabelKind.GROUNDED,
        description="judge metrics: the label kind the judge is measured on (schemas.label_kinds), or "
        "custom.<name> of a pattern or pass/fail evaluator: then that evaluator's agreement",
    )

    @property
    def judge_metric(self) -> bool:
        """Whether the rule watches the judge's agreement with people (not a window metric)."""
        return self.metric in AGREEMENT_BY_NAME

    @model_validator(mode="after")
    def _judge_fields(self) -> _RuleBase:
        given = self.model_fields_set & {"labels", "label_kind", "baseline_labels"}
        if given and not self.judge_metric:
            raise ValueError(
                f"{', '.join(sorted(given))}: only for a judge metric ({', '.join(AGREEMENT_BY_NAME)})"
            )
        if self.judge_metric and self.group_by:
            raise ValueError("group_by: a judge metric is measured per app/model, not per slice")
        return self


class AlertRule(_RuleBase):
    """A fixed threshold on the pooled last ``windows`` windows."""

    kind: Literal["threshold"] = "threshold"
    op: Literal[">", ">=", "<", "<="] = ">"
    threshold: float
    # resolved when the metric is this far back on the good side of the threshold (0.25 with ">" and
    # hysteresis 0.05: resolved at or below 0.20; a total's hysteresis is in its unit: tokens, USD)
    hysteresis: float = Field(0.05, ge=0)


class BaselineRule(_RuleBase):
    """The current window(s) against the app/model's own trailing baseline."""

    kind: Literal["baseline"]
    windows: int = Field(2, ge=1)
    min_interactions: int = Field(40, ge=1)
    direction: Literal["up", "down"] | None = Field(
        None, description="the bad direction; None: up for a rate, down for a mean entailment"
    )
    baseline_windows: int = Field(24, ge=2, description="windows before the current ones: the baseline")
    min_baseline_interactions: int = Field(100, ge=1)
    confidence: float = Field(0.999, gt=0.5, lt=1, description="one-sided confidence of the change")
    min_effect: float = Field(0.05, gt=0, le=1, description="smallest change that alerts (0.05 = 5 points)")
    resolve_effect: float | None = Field(
        None, ge=0, description="resolved when the change is below this; None: half of min_effect"
    )

    baseline_labels: int = Field(
        400, ge=1, description="judge metrics: the labeled interactions before the last ``labels``"
    )

    @model_validator(mode="after")
    def _check(self) -> BaselineRule:
        if self.resolve_effect is not None and self.resolve_effect >= self.min_effect:
            raise ValueError("resolve_effect must be below min_effect (the hysteresis)")
        known = metric_named(self.metric)
        if known is not None and known.kind is MetricKind.SUM:
            raise ValueError(f"{self.metric} is a total: a baseline rule watches a rate, a mean or the judge")
        return self

    @property
    def bad_direction(self) -> Literal["up", "down"]:
        if self.direction is not None:
            return self.direction
        return "up" if higher_is_bad(self.metric) else "down"

    @property
    def resolve_below(self) -> float:
        return self.min_effect / 2 if self.resolve_effect is None else self.resolve_effect


def _rule_kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("kind", "threshold"))
    return str(getattr(value, "kind", "threshold"))


AnyRule = Annotated[
    Annotated[AlertRule, Tag("threshold")] | Annotated[BaselineRule, Tag("baseline")],
    Discriminator(_rule_kind),
]


class Receiver(BaseModel):
    """Where transitions are sent. Secrets (a signing secret, a Slack hook URL) can live in the
    environment: ``secret_env`` / ``url_env`` name the variable."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["webhook", "slack", "alertmanager"]
    url: str | None = Field(None, description="webhook URL, Slack hook URL, or Alertmanager base URL")
    url_env: str | None = Field(None, description="environment variable holding the URL instead")
    secret: str | None = Field(None, description="webhook: HMAC-SHA256 signing secret")
    secret_env: str | None = Field(None, description="webhook: environment variable holding the secret")
    signature_header: str = "X-Groundwatch-Signature"
    retries: int = Field(5, ge=0)
    backoff_s: float = Field(1.0, ge=0, description="first retry delay, doubling")
    timeout_s: float = Field(5.0, gt=0, description="timeout of one attempt")
    delivery_timeout_s: float = Field(
        60.0,
        gt=0,
        description="most seconds one delivery may take, its retries and backoff included; then it is "
        "given up and recorded as failed (below alerts.delivery_lease_s)",
    )
    firing_ttl_hours: float = Field(
        168, gt=0, description="alertmanager: endsAt of a firing alert (Alertmanager resolves it after)"
    )

    @model_validator(mode="after")
    def _check(self) -> Receiver:
        if (self.url is None) == (self.url_env is None):
            raise ValueError(f"receiver {self.name!r}: give exactly one of url and url_env")
        if self.kind != "webhook" and (self.secret or self.secret_env):
            raise ValueError(f"receiver {self.name!r}: only a webhook receiver is signed")
        if self.secret is not None and self.secret_env is not None:
            raise ValueError(f"receiver {self.name!r}: give at most one of secret and secret_env")
        return self


class AlertRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[AnyRule]
    receivers: list[Receiver] = Field(default_factory=list)

    @model_validator(mode="after")
    def _every_evaluator(self) -> AlertRules:
        """A rule on ``custom.*.missing`` or ``custom.*.coverage``: one rule per evaluator of the loaded
        evaluators file (none without one), named ``<rule>.<evaluator>``, so an evaluator that starts
        failing, or goes silent, alerts on its own."""
        if not any(r.metric in EVERY_EVALUATOR for r in self.rules):
            return self
        expanded: list[AnyRule] = []
        for rule in self.rules:
            suffix = EVERY_EVALUATOR.get(rule.metric)
            if suffix is None:
                expanded.append(rule)
                continue
            for metric in (m.name for m in custom_metrics() if m.name.endswith(suffix)):
                evaluator = metric.removeprefix(CUSTOM_PREFIX).removesuffix(suffix)
                expanded.append(
                    rule.model_copy(update={"metric": metric, "name": f"{rule.name}.{evaluator}"})
                )
        self.rules = expanded
        return self

    @model_validator(mode="after")
    def _unique(self) -> AlertRules:
        named = (("rule", [r.name for r in self.rules]), ("receiver", [r.name for r in self.receivers]))
        for what, names in named:
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"duplicate {what} names: {', '.join(dup)}")
        return self


AlertState = Literal["firing", "resolved"]


class Alert(BaseModel):
    """One transition of one alert. The firing's ``alert_id`` (rule + app + model + the window it fired
    on) is the incident's id; the resolution's is that id + ``|resolved``. Both are deterministic: every
    worker that evaluates the same windows produces the same ids."""

    alert_id: str
    rule: str
    metric: AlertMetric
    app: str
    model: str
    value: float  # the current value (pooled over ``windows`` windows)
    threshold: float  # threshold rule: its threshold; baseline rule: baseline +/- min_effect
    op: str
    windows: int
    interactions: int  # the interactions the metric was computed over (its denominator)
    window_start: datetime
    window_end: datetime
    fired_at: datetime  # the transition's wall time, on the worker's clock
    message: str
    state: AlertState = "firing"
    kind: Literal["threshold", "baseline"] = "threshold"
    incident_id: str = ""  # the firing's alert_id ("" in rows from before migration 004: alert_id)
    starts_at: datetime | None = None  # event time the alert started firing (end of its window)
    ends_at: datetime | None = None  # event time it resolved (resolved transitions only)
    baseline: float | None = None  # baseline rule: the baseline (frozen when it fired)
    baseline_interactions: int = 0
    severity: str = "warning"
    slice: str = ""  # a rule with group_by: the slice it is about ("prompt_version=v2"); else ""

    @field_validator("window_start", "window_end", "fired_at", "starts_at", "ends_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else utc(value)

    @property
    def incident(self) -> str:
        return self.incident_id or self.alert_id
