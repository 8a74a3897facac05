"""The metrics groundwatch reports per app, model and time bucket, declared once.

Each metric is a ratio of two sums over ``window_aggregates`` rows (or a plain sum), so any number of
windows (one window, an hour, a day, a whole range) pool exactly: a rate is the sum of its numerators over
the sum of its denominators, a mean is weighted by the interactions that carry it. Window aggregation,
alert rules, the trend report, the dashboard API, the Grafana dashboard generator and their tests all read
this list; the SQL expressions use only columns of ``window_aggregates`` (deploy/clickhouse).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.window import WindowAggregate


class MetricKind(StrEnum):
    RATE = "rate"  # numerator / denominator, both counts of interactions; gets a Wilson interval
    MEAN = "mean"  # sum of per-interaction scores / interactions scored
    SUM = "sum"  # a plain total (volume, tokens, cost)


class Over(StrEnum):
    """What a rate or mean is over: interactions (``EvalRow`` fields) or conversations (the fields of
    ``schemas.conversation.ConversationRollup``, windowed by the conversation's last turn)."""

    INTERACTION = "interaction"
    CONVERSATION = "conversation"


class RowSum(BaseModel):
    """What one row adds to one ``window_aggregates`` column of a sum: ``value`` (a field of the row, the
    ``evaluations`` column of the same name; None: 1) when every condition of ``when`` holds (a boolean
    field and the value it must have). Declared once, it gives both the window aggregator's count
    (``of``, streams.windows.aggregator) and the per-interaction SQL of slices and Compare (``sql``)."""

    model_config = ConfigDict(frozen=True)

    column: str = Field(description="the window_aggregates column it adds to")
    value: str | None = Field(None, description="the row's field added; None: the row counts 1")
    when: tuple[tuple[str, bool], ...] = Field(
        (), description="the boolean fields the row must have (and their values) to count; empty: every row"
    )

    def of(self, row: Any) -> float:
        """What ``row`` (an EvalRow, or a ConversationRollup for a conversation sum) adds."""
        if all(bool(getattr(row, field)) is wanted for field, wanted in self.when):
            return getattr(row, self.value) if self.value else 1
        return 0

    def sql(self, within: str = "1") -> str:
        """The aggregate over the ``evaluations`` rows ``within`` holds: the sum of what each adds."""
        conditions = [f"({within})", *(f"{field} = {int(wanted)}" for field, wanted in self.when)]
        return f"sumIf(toFloat64({self.value or 1}), {' AND '.join(conditions)})"


class Metric(BaseModel):
    """One metric, declared once: where its per-interaction values come from (an ``EvalRow`` field), which
    ``window_aggregates`` columns hold its window value and its denominator, and from these the SQL that
    pools it over any number of windows. Window aggregation (streams.windows.aggregator), alert rules,
    the trend report, the dashboard API and the Grafana generator all read it from here."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(
        description="identifier used by the API, the charts and alert rules; for a rate or mean also the "
        "window_aggregates column holding the window's value"
    )
    label: str = Field(description="human-readable name for chart titles")
    short: str = Field(max_length=8, description="a column heading for text tables (the trend report)")
    kind: MetricKind = Field(description="how windows pool: rate, mean or sum")
    source: str | None = Field(
        None,
        description="rate or mean: the per-interaction EvalRow field averaged over the interactions where it "
        "is not null (a flag counts 1/0)",
    )
    count_column: str | None = Field(
        None, description="rate or mean: the window_aggregates column counting the interactions it is over"
    )
    events_column: str | None = Field(
        None, description="rate: a window_aggregates column counting its events exactly, when there is one"
    )
    sum_columns: tuple[str, ...] = Field((), description="sum: the window_aggregates columns it adds up")
    per_row: tuple[RowSum, ...] = Field(
        (),
        description="a sum (but a custom evaluator's): what one row of what it is over adds to each of its "
        "sum_columns, in their order",
    )
    over: Over = Field(
        Over.INTERACTION,
        description="what it counts: interactions (a rate or mean's ``source`` an EvalRow field) or "
        "conversations (a ConversationRollup field); a conversation metric has no per-interaction value: "
        "the Breakdown and Compare compute it from the conversations (streams.clickhouse.slices)",
    )
    unit: str = Field(
        "", description="unit shown beside values: '' (a share 0-1), 'count', 'tokens', 'USD', 'turns'"
    )
    lower_is_better: bool = Field(True, description="direction of a good change, for colouring")
    custom_key: str | None = Field(
        None,
        description="a custom evaluator's metric (schemas.evaluators): its name, the key of its value and "
        "count in the Map columns custom_values and custom_scored (a sum: of its count in custom_missing)",
    )

    coverage: bool = Field(
        False,
        description="a custom evaluator's coverage (custom_key): the share of the judged interactions it "
        "scored; its count is custom_scored, its denominator the window's judged interactions",
    )

    @model_validator(mode="after")
    def _complete(self) -> Metric:
        if self.coverage and (self.custom_key is None or self.kind is not MetricKind.RATE):
            raise ValueError(f"{self.name}: a coverage is a custom evaluator's rate")
        if self.kind is MetricKind.SUM:
            if not self.sum_columns or self.source or self.count_column:
                raise ValueError(f"{self.name}: a sum names sum_columns only")
        elif not (self.source and self.count_column) or self.sum_columns:
            raise ValueError(f"{self.name}: a rate or mean names its source and count_column")
        if self.events_column and self.kind is not MetricKind.RATE:
            raise ValueError(f"{self.name}: only a rate counts events")
        if self.custom_key is None and tuple(r.column for r in self.per_row) != (
            self.sum_columns if self.kind is MetricKind.SUM else ()
        ):
            raise ValueError(f"{self.name}: a sum says what one row adds to each sum_columns (per_row)")
        return self

    @property
    def numerator(self) -> str:
        """SQL over one window_aggregates row whose sum over windows is the pooled numerator."""
        if self.kind is MetricKind.SUM:
            return " + ".join(self.sum_columns)
        if self.events_column:
            return self.events_column
        value = f"custom_values['{self.custom_key}']" if self.custom_key else self.name
        scaled = f"ifNull({value}, 0) * {self.count_column}"
        return f"round({scaled})" if self.kind is MetricKind.RATE else scaled

    @property
    def denominator(self) -> str | None:
        """SQL summed over windows for the pooled denominator; None for a sum."""
        return self.count_column

    def totals(self, window: WindowAggregate) -> tuple[float, int]:
        """(numerator, denominator) of one window, as the SQL above computes them; (sum, 0) for a sum."""
        if self.kind is MetricKind.SUM and self.custom_key is not None:
            return float(window.custom_missing.get(self.custom_key, 0)), 0
        if self.coverage and self.custom_key is not None:
            return float(window.custom_scored.get(self.custom_key, 0)), window.judged
        if self.kind is MetricKind.SUM:
            return float(sum(getattr(window, c) for c in self.sum_columns)), 0
        if self.custom_key is not None:
            n = window.custom_scored.get(self.custom_key, 0)
            value = window.custom_values.get(self.custom_key)
        else:
            n = int(getattr(window, str(self.count_column)))
            value = getattr(window, self.name)
        if self.events_column:
            return float(getattr(window, self.events_column)), n
        if value is None or n <= 0:
            return 0.0, n
        total = float(value) * n
        return (float(round(total)) if self.kind is MetricKind.RATE else total), n


def _rate(name: str, label: str, short: str, source: str, count: str, events: str | None = None) -> Metric:
    return Metric(
        name=name, label=label, short=short, kind=MetricKind.RATE, source=source, count_column=count,
        events_column=events,
    )  # fmt: skip


def _recall(name: str, label: str, short: str, source: str, count: str, events: str) -> Metric:
    """A rate where higher is better (a recall or a precision)."""
    return Metric(
        name=name, label=label, short=short, kind=MetricKind.RATE, source=source, count_column=count,
        events_column=events, lower_is_better=False,
    )  # fmt: skip


def _mean(name: str, label: str, short: str, source: str, count: str) -> Metric:
    return Metric(
        name=name, label=label, short=short, kind=MetricKind.MEAN, source=source, count_column=count,
        lower_is_better=False,
    )  # fmt: skip


#: the window_aggregates column counting the conversations with at least one judged turn: the denominator
#: of the conversation rates read from the judge's verdicts (a conversation sampled out entirely has none)
JUDGED_CONVERSATIONS = "conversations_judged"


def _conversation(
    name: str,
    label: str,
    short: str,
    source: str,
    events: str | None,
    kind: MetricKind = MetricKind.RATE,
    unit: str = "",
    count: str = "conversations",
) -> Metric:
    return Metric(
        name=name, label=label, short=short, kind=kind, source=source, count_column=count,
        events_column=events, over=Over.CONVERSATION, unit=unit,
    )  # fmt: skip


def _sum(name: str, label: str, short: str, per_row: tuple[RowSum, ...], unit: str) -> Metric:
    return Metric(
        name=name, label=label, short=short, kind=MetricKind.SUM, unit=unit, per_row=per_row,
        sum_columns=tuple(r.column for r in per_row),
    )  # fmt: skip


_JUDGED = (("judged", True),)  # tokens, cost and incomplete count over judged rows only


METRICS: tuple[Metric, ...] = (
    _rate(
        "hallucination_rate", "Hallucination rate", "halluc", "hallucination", "answered", "hallucinations"
    ),
    _rate("answer_refusal_rate", "Answer refusal rate", "refusal", "answer_refusal", "answer_refusal_known"),
    _rate(
        "ground_truth_refusal_rate",
        "Ground-truth refusal rate",
        "gt ref",
        "ground_truth_refusal",
        "ground_truth_refusal_known",
    ),
    _mean(
        "mean_context_entailment", "Context ⇒ answer (mean entailment)", "ctx", "context_entailment",
        "context_scored",
    ),
    _mean(
        "mean_ground_truth_entails_answer", "Ground truth ⇒ answer (mean entailment)", "gt=>a",
        "ground_truth_entails_answer", "ground_truth_answer_scored",
    ),
    _mean(
        "mean_answer_entails_ground_truth", "Answer ⇒ ground truth (mean entailment)", "a=>gt",
        "answer_entails_ground_truth", "answer_ground_truth_scored",
    ),
    _mean(
        "mean_grounded_precision", "Grounded-unit precision", "gr prec", "grounded_precision",
        "grounded_precision_scored",
    ),
    Metric(
        name="mean_tool_calls", label="Tool calls per interaction", short="tools", kind=MetricKind.MEAN,
        source="tool_calls", count_column="tool_calls_scored", unit="count",
    ),
    _rate(
        "tool_error_rate", "Tool error rate", "tool err", "tool_error",
        "tool_error_known", "tool_errors",
    ),
    _rate(
        "no_evidence_rate", "Answers without evidence", "no evid", "no_evidence", "no_evidence_known",
        "no_evidence_answers",
    ),
    _rate(
        "ungrounded_arguments_rate", "Ungrounded tool arguments", "ungr arg", "ungrounded_arguments",
        "ungrounded_arguments_known", "ungrounded_arguments_events",
    ),
    _mean(
        "mean_citation_recall", "Citation recall (statements their citations support)", "cit rec",
        "citation_recall", "citation_recall_scored",
    ),
    _mean(
        "mean_citation_precision", "Citation precision (citations that support)", "cit prec",
        "citation_precision", "citation_precision_scored",
    ),
    Metric(
        name="mean_uncited_statements", label="Uncited statements (share of a citing answer)",
        short="uncited", kind=MetricKind.MEAN, source="uncited_statements",
        count_column="uncited_statements_scored",
    ),
    _rate(
        "miscited_rate", "Miscited answers", "miscited", "miscited", "miscited_known", "miscited_answers"
    ),
    _rate(
        "dangling_citation_rate", "Answers with a dangling citation", "dangling", "dangling_citation",
        "dangling_citation_known", "dangling_citation_answers",
    ),
    # refusal groundedness (pipeline/answerability.py): Trust-Eval's figures over the interactions whose
    # answerability is known (lower_is_better False for its recalls and precisions)
    _rate(
        "over_refusal_rate", "Over-refusal (answerable, refused)", "over ref", "over_refusal",
        "answerable_questions", "over_refusals",
    ),
    _rate(
        "answered_unanswerable_rate", "Answered unanswerable", "ans unan", "answered_unanswerable",
        "unanswerable_questions", "unanswerable_answered",
    ),
    _recall(
        "reject_recall", "Reject recall", "rej rec", "refused_unanswerable",
        "unanswerable_questions", "unanswerable_refused",
    ),
    _recall(
        "reject_precision", "Reject precision", "rej prec",
        "justified_refusal", "refusals_answerability_known", "unanswerable_refused",
    ),
    _recall(
        "answerable_recall", "Answerable recall", "ans rec",
        "answered_answerable", "answerable_questions", "answerable_answered",
    ),
    _recall(
        "answerable_precision", "Answerable precision", "ans prec",
        "justified_answer", "answers_answerability_known", "answerable_answered",
    ),
    _sum("interactions", "Interactions", "n", (RowSum(column="count"),), "count"),
    _sum(
        "judged", "Judged interactions (the rest skipped by sampling)", "judged",
        (RowSum(column="judged", when=_JUDGED),), "count",
    ),
    _sum(
        "skipped", "Skipped interactions (sampling rules, judge budget)", "skipped",
        (RowSum(column="skipped", when=(("judged", False),)),), "count",
    ),
    _sum(
        "incomplete", "Incomplete evaluations", "incomp",
        (RowSum(column="incomplete", when=(*_JUDGED, ("complete", False))),), "count",
    ),
    _sum(
        "judge_tokens", "Judge tokens (in + out)", "tokens",
        (
            RowSum(column="input_tokens", value="input_tokens", when=_JUDGED),
            RowSum(column="output_tokens", value="output_tokens", when=_JUDGED),
        ),
        "tokens",
    ),
    _sum(
        "judge_cost_usd", "Judge cost", "cost $",
        (RowSum(column="cost_usd", value="cost_usd", when=_JUDGED),), "USD",
    ),
    _conversation(
        "conversation_hallucinated_rate", "Conversations with a hallucinated turn", "cv hal",
        "any_hallucinated", "conversations_hallucinated", count=JUDGED_CONVERSATIONS,
    ),
    _conversation(
        "conversation_unresolved_rate", "Conversations ended unresolved", "cv unres", "ended_unresolved",
        "conversations_unresolved", count=JUDGED_CONVERSATIONS,
    ),
    _conversation(
        "conversation_reask_rate", "Conversations with a re-asked question", "cv reask", "reasked",
        "conversations_reasked",
    ),
    _conversation(
        "conversation_contradiction_rate", "Conversations with a self-contradiction", "cv contr",
        "contradicted", "conversations_contradicted",
    ),
    _conversation(
        "mean_turns_per_conversation", "Turns per conversation", "turns/cv", "turns", None, MetricKind.MEAN,
        unit="turns",
    ),
    Metric(
        name="conversations_closed", label="Conversations closed", short="convs", kind=MetricKind.SUM,
        sum_columns=("conversations",), per_row=(RowSum(column="conversations"),), unit="count",
        over=Over.CONVERSATION,
    ),
)  # fmt: skip

METRICS_BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


def pooled(metric: Metric, windows: Iterable[WindowAggregate]) -> float | None:
    """A rate or mean over several windows: the sum of their numerators over the sum of their
    denominators (None without a denominator); a sum's total."""
    total, n = 0.0, 0
    for window in windows:
        t, k = metric.totals(window)
        total, n = total + t, n + k
    if metric.kind is MetricKind.SUM:
        return total
    return total / n if n else None


#: the rates and means: what a window aggregates per interaction
SCORED: tuple[Metric, ...] = tuple(
    m for m in METRICS if m.kind is not MetricKind.SUM and m.over is Over.INTERACTION
)
#: the rates and means a window aggregates per conversation (its conversations' rollups)
CONVERSATION_SCORED: tuple[Metric, ...] = tuple(
    m for m in METRICS if m.kind is not MetricKind.SUM and m.over is Over.CONVERSATION
)


def scored_values(row: Any) -> Iterator[tuple[Metric, float]]:
    """Each rate and mean over interactions a judged row (an EvalRow) has a value of, with that value (a
    flag as 1/0): what a window pools for it (streams.windows.aggregator) and what ``groundwatch eval``
    pools over a file (pipeline.report); a row not judged has none."""
    if not getattr(row, "judged", True):
        return
    for metric in SCORED:
        value = getattr(row, str(metric.source))
        if value is not None:
            yield metric, float(value)


def _window_sums(over: Over) -> dict[str, RowSum]:
    """Each window_aggregates column the fixed sums over ``over`` add up, and what one row adds to it (a
    column two sums share must be declared the same in both)."""
    out: dict[str, RowSum] = {}
    for metric in METRICS:
        if metric.kind is MetricKind.SUM and metric.over is over:
            for row_sum in metric.per_row:
                if out.setdefault(row_sum.column, row_sum) != row_sum:
                    raise ValueError(f"{row_sum.column}: two sums declare it differently")
    return out


#: what one evaluations row adds to each column the sums over interactions add up (the window
#: aggregator counts these; slices and Compare sum them in SQL)
INTERACTION_SUMS: dict[str, RowSum] = _window_sums(Over.INTERACTION)
#: what one conversation (its rollup) adds to each column the sums over conversations add up
CONVERSATION_SUMS: dict[str, RowSum] = _window_sums(Over.CONVERSATION)
RATE_METRICS: frozenset[str] = frozenset(m.name for m in METRICS if m.kind is MetricKind.RATE)
#: what a sum's alert rule counts as the interactions behind it (``min_interactions``)
SUM_SUPPORT_COLUMN = "count"


class AgreementMetric(BaseModel):
    """How well the judge agrees with people's labels (``pipeline.metrics.agreement.Agreement``), over
    the last labels of an app/model: not a window metric (windows hold no labels), but one alert rules
    may watch to page when the judge itself drifts (docs/alerts.md)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="identifier used by alert rules")
    label: str = Field(description="human-readable name")
    field: str = Field(description="the Agreement estimate it reads")


AGREEMENT_METRICS: tuple[AgreementMetric, ...] = (
    AgreementMetric(
        name="judge_balanced_accuracy", label="Judge balanced accuracy", field="balanced_accuracy"
    ),
    AgreementMetric(name="judge_sensitivity", label="Judge sensitivity", field="sensitivity"),
    AgreementMetric(name="judge_specificity", label="Judge specificity", field="specificity"),
    AgreementMetric(name="judge_kappa", label="Judge Cohen's kappa", field="kappa"),
)
AGREEMENT_BY_NAME: dict[str, AgreementMetric] = {m.name: m for m in AGREEMENT_METRICS}
#: every metric an alert rule may watch: each metric of the catalogue, and the judge's agreement
ALERT_METRICS: tuple[str, ...] = (*(m.name for m in METRICS), *(m.name for m in AGREEMENT_METRICS))


def higher_is_bad(name: str) -> bool:
    """The bad direction of an alertable metric: up for a rate or a cost, down for a mean or agreement."""
    metric = metric_named(name)
    return metric.lower_is_better if metric is not None else False


#: the custom evaluators' metrics (``custom.<name>``), installed from the evaluators file at start
#: (``pipeline.custom_evaluators.load_evaluators``): the dynamic part of the catalogue
_CUSTOM: dict[str, Metric] = {}


def install_custom(metrics: Iterable[Metric]) -> None:
    """Make these custom metrics (and only these) part of the catalogue."""
    _CUSTOM.clear()
    _CUSTOM.update((m.name, m) for m in metrics)


def custom_metrics() -> tuple[Metric, ...]:
    return tuple(_CUSTOM.values())


def catalogue() -> tuple[Metric, ...]:
    """Every metric: the fixed ones, then the custom evaluators' installed from the evaluators file."""
    return (*METRICS, *_CUSTOM.values())


def metric_named(name: str) -> Metric | None:
    """A fixed or installed custom metric by name; None when there is none."""
    return METRICS_BY_NAME.get(name) or _CUSTOM.get(name)


def named(name: str) -> Metric:
    """A fixed or installed custom metric by a name already checked; KeyError when there is none."""
    metric = metric_named(name)
    if metric is None:
        raise KeyError(f"no metric {name!r} in the catalogue")
    return metric


def alert_metric_names() -> tuple[str, ...]:
    """Every metric an alert rule may watch now: ALERT_METRICS and the installed custom metrics."""
    return (*ALERT_METRICS, *_CUSTOM)
