"""The worker's Prometheus metrics, on a registry of its own (served at /metrics by streams.probes).

Counted where things happen: events in and out per processor, dead letters by stage and error type,
interactions received, judged and skipped by app and reason (pipeline.sampling), sink rows and flush
time, dead-letter rows written, tool calls by app, tool and status, answers without evidence,
ungrounded tool arguments, answers whose citations were checked, miscited answers, dangling citations
and the answerability cases (answerable, refused, which source decided) by app (from each Evaluation the
sink writes); windows closed, alert
transitions, failed deliveries and the dead-letter recorder's lag are read at scrape time; judge calls,
retries, errors, tokens, cost, cache hits and call latency are read off each Evaluation's call records
as the sink writes it (one place sees every call of every stage, on either topology), and so are the
custom evaluators' scores and failures. Consumer lag is
read from the consumer when Prometheus scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from schemas.evaluation import Evaluation
from schemas.evaluator_health import stage_outcomes

#: seconds; judge calls take milliseconds (cache) to minutes (a local model under load)
LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)

LagSource = Callable[[], Iterable[tuple[str, int, int]]]  # (topic, partition, lag)


class ConsumerLag(Collector):
    """groundwatch_consumer_lag{topic,partition}: messages behind the high-water mark, per partition."""

    def __init__(self, source: LagSource) -> None:
        self.source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "groundwatch_consumer_lag",
            "messages not yet committed, per partition",
            labels=["topic", "partition"],
        )
        try:
            rows = list(self.source())
        except Exception:  # the consumer is not up yet (or stopping): no samples
            rows = []
        for topic, partition, lag in rows:
            family.add_metric([topic, str(partition)], float(lag))
        yield family


class DeadLetterLag(Collector):
    """How far the dead-letter recorder is behind: rows read and not yet written to ClickHouse, and how
    long the oldest of them has waited."""

    def __init__(self, source: Callable[[], tuple[int, float]]) -> None:
        self.source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            rows, waited = self.source()
        except Exception:
            rows, waited = 0, 0.0
        yield GaugeMetricFamily(
            "groundwatch_dead_letters_unrecorded", "dead letters read and not yet written to ClickHouse",
            value=float(rows),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "groundwatch_dead_letters_unrecorded_seconds",
            "seconds the oldest dead letter not yet written to ClickHouse has waited",
            value=waited,
        )


class Totals(Collector):
    """groundwatch_<name>_total for counts another component keeps (windows closed, alert transitions)."""

    def __init__(self, source: Callable[[], dict[str, int]]) -> None:
        self.source = source

    def collect(self) -> Iterator[CounterMetricFamily]:
        try:
            counts = self.source()
        except Exception:
            counts = {}
        for name, value in sorted(counts.items()):
            yield CounterMetricFamily(
                f"groundwatch_{name}", f"{name.replace('_', ' ')} since start", value=value
            )


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._worst_loop_lag = 0.0
        r = self.registry
        self.events_in = Counter(
            "groundwatch_events_in", "messages taken by a processor", ["stage"], registry=r
        )
        self.events_out = Counter(
            "groundwatch_events_out", "messages a processor finished (output sent or row written)", ["stage"],
            registry=r,
        )  # fmt: skip
        self.dead_letters = Counter(
            "groundwatch_dead_letters", "dead letters sent", ["stage", "error_type"], registry=r
        )
        self._judge_metrics(r)
        self._traffic_metrics(r)
        self._custom_metrics(r)
        self.sink_rows = Counter("groundwatch_sink_rows", "evaluations written to ClickHouse", registry=r)
        self.sink_flush = Histogram("groundwatch_sink_flush_seconds", "ClickHouse insert time", registry=r)
        self.dead_letter_rows = Counter(
            "groundwatch_dead_letter_rows", "dead letters written to ClickHouse", registry=r
        )
        self.loop_lag = Histogram(
            "groundwatch_event_loop_lag_seconds",
            "how much later than asked the event loop woke a task due every 0.25 s (streams.loop_lag)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0), registry=r,
        )  # fmt: skip
        self.loop_lag_max = Gauge(
            "groundwatch_event_loop_lag_max_seconds", "the worst event-loop lag since the worker started",
            registry=r,
        )  # fmt: skip

    def _judge_metrics(self, r: CollectorRegistry) -> None:
        """The judge's calls, retries, cache hits, errors, tokens, cost and latency."""
        self.judge_calls = Counter(
            "groundwatch_judge_calls",
            "judge calls that reached a model",
            ["judge", "model", "stage"],
            registry=r,
        )
        self.judge_retries = Counter(
            "groundwatch_judge_retries", "extra attempts of judge calls", ["judge", "model"], registry=r
        )
        self.judge_cache_hits = Counter(
            "groundwatch_judge_cache_hits", "verdicts served from the cache", ["judge", "model"], registry=r
        )
        self.judge_errors = Counter(
            "groundwatch_judge_errors",
            "judge failures that dead-lettered an interaction",
            ["stage"],
            registry=r,
        )
        self.tokens = Counter(
            "groundwatch_judge_tokens", "judge tokens", ["judge", "model", "direction"], registry=r
        )
        self.cost = Counter("groundwatch_judge_cost_usd", "judge cost in USD", ["judge", "model"], registry=r)
        self.judge_latency = Histogram(
            "groundwatch_judge_call_seconds", "latency of judge calls that reached a model",
            ["judge", "model"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip

    def _traffic_metrics(self, r: CollectorRegistry) -> None:
        """Interactions received, sampled and skipped; their tool calls and answers without evidence."""
        self.interactions_received = Counter(
            "groundwatch_interactions_received", "interactions that reached judging (sampled or not)",
            ["app"], registry=r,
        )  # fmt: skip
        self.interactions_sampled = Counter(
            "groundwatch_interactions_sampled", "interactions sent to the judge, by the reason they were",
            ["app", "reason"], registry=r,
        )  # fmt: skip
        self.interactions_skipped = Counter(
            "groundwatch_interactions_skipped", "interactions stored unjudged (sampling rules, judge budget)",
            ["app", "reason"], registry=r,
        )  # fmt: skip
        self.tool_calls = Counter(
            "groundwatch_tool_calls", "tool calls of the questions judged (steps not of earlier turns)",
            ["app", "tool", "status"], registry=r,
        )  # fmt: skip
        self.answers_without_evidence = Counter(
            "groundwatch_answers_without_evidence",
            "answers with a factual statement and no evidence at all (outcome unsupported_no_evidence)",
            ["app"], registry=r,
        )  # fmt: skip
        self.ungrounded_tool_arguments = Counter(
            "groundwatch_ungrounded_tool_arguments",
            "interactions whose tool calls used an argument value found nowhere before the call",
            ["app"], registry=r,
        )  # fmt: skip
        self.cited_answers = Counter(
            "groundwatch_cited_answers",
            "answers with a statement citing a passage, its citations checked (docs/citations.md)",
            ["app"], registry=r,
        )  # fmt: skip
        self.miscited_answers = Counter(
            "groundwatch_miscited_answers",
            "answers with a statement its citations do not support (miscited)",
            ["app"], registry=r,
        )  # fmt: skip
        self.dangling_citations = Counter(
            "groundwatch_dangling_citations",
            "references of answers that name no passage (a position past the evidence, an unknown name)",
            ["app"], registry=r,
        )  # fmt: skip
        self.answerability_cases = Counter(
            "groundwatch_answerability_cases",
            "answers whose question's answerability is known, by whether it was answerable, whether the "
            "answer refused and what decided answerable: Trust-Eval's four cells (docs/answerability.md)",
            ["app", "answerable", "refused", "source"], registry=r,
        )  # fmt: skip
        self.otlp_steps = Counter(
            "groundwatch_otlp_model_calls_as_steps",
            "OpenTelemetry model calls read as steps of a final answer (they only asked for tools, or a "
            "sub-agent answered), by whether their trace had a final answer",
            ["final_answer"], registry=r,
        )  # fmt: skip

    def _custom_metrics(self, r: CollectorRegistry) -> None:
        """The checks' results: the judge's stages, and your own evaluators' scores and failures."""
        # your own evaluators (schemas.evaluators): a rate or mean is score / scored; the version is a label,
        # so a changed evaluator is a new series
        custom = ["evaluator", "version", "app", "model"]
        self.custom_scored = Counter(
            "groundwatch_custom_scored", "interactions a custom evaluator scored", custom, registry=r
        )
        self.custom_score = Counter(
            "groundwatch_custom_score", "the sum of a custom evaluator's scores (0-1 each; a flag counts 1)",
            custom, registry=r,
        )  # fmt: skip
        self.custom_missing = Counter(
            "groundwatch_custom_missing", "interactions a custom evaluator failed to score, by reason",
            [*custom, "reason"], registry=r,
        )  # fmt: skip
        self.stage_results = Counter(
            "groundwatch_stage_results",
            "judged interactions a stage of the judge applied to, by whether it gave its result (scored) or "
            "failed or timed out (missing; its dead letter says why)",
            ["stage", "app", "outcome"], registry=r,
        )  # fmt: skip
        self.stage_last_result = Gauge(
            "groundwatch_stage_last_result_timestamp_seconds",
            "when a stage of the judge last gave its result (Unix time of that evaluation)",
            ["stage"], registry=r,
        )  # fmt: skip
        self.custom_last_score = Gauge(
            "groundwatch_custom_last_score_timestamp_seconds",
            "when a custom evaluator last gave a score (Unix time of that evaluation): an evaluator that "
            "stopped scoring shows as a time that no longer moves",
            ["evaluator"], registry=r,
        )  # fmt: skip

    def loop_lagged(self, seconds: float) -> None:
        """One measure of the event loop's lag (``streams.loop_lag``)."""
        self.loop_lag.observe(seconds)
        if seconds > self._worst_loop_lag:
            self._worst_loop_lag = seconds
            self.loop_lag_max.set(seconds)

    def watch_lag(self, source: LagSource) -> None:
        self.registry.register(ConsumerLag(source))

    def watch_dead_letters(self, source: Callable[[], tuple[int, float]]) -> None:
        """The dead-letter recorder's lag (``DeadLetterLag``), read at scrape time."""
        self.registry.register(DeadLetterLag(source))

    def recorded(self, rows: int) -> None:
        """Dead-letter rows went to ClickHouse."""
        self.dead_letter_rows.inc(rows)
        self.events_out.labels("dead_letters").inc(rows)

    def watch_counts(self, source: Callable[[], dict[str, int]]) -> None:
        """Counters kept elsewhere (windows, alert transitions, failed deliveries), read at scrape time."""
        self.registry.register(Totals(source))

    def dead_letter(self, stage: str, error_type: str) -> None:
        self.dead_letters.labels(stage, error_type).inc()
        if error_type in ("JudgeError", "StageError"):
            self.judge_errors.labels(stage).inc()

    def sampling(self, app: str, judged: bool, reason: str) -> None:
        """One interaction reached judging: judged (``reason``: what picked it) or skipped (why)."""
        self.interactions_received.labels(app).inc()
        counter = self.interactions_sampled if judged else self.interactions_skipped
        counter.labels(app, reason).inc()

    def written(self, evaluations: Sequence[Evaluation], seconds: float) -> None:
        """A batch of evaluations went to ClickHouse: count the rows and their judge calls."""
        self.sink_rows.inc(len(evaluations))
        self.events_out.labels("sink").inc(len(evaluations))
        self.sink_flush.observe(seconds)
        for evaluation in evaluations:
            self._calls(evaluation)
            self._tools(evaluation)
            self._citations(evaluation)
            self._answerability(evaluation)
            self._custom(evaluation)
            self._stages(evaluation)

    def _tools(self, evaluation: Evaluation) -> None:
        steps = evaluation.interaction.steps if evaluation.interaction is not None else []
        for step in steps:
            if not step.earlier_turn:
                self.tool_calls.labels(evaluation.app, step.name, step.status).inc()
        if evaluation.no_evidence:
            self.answers_without_evidence.labels(evaluation.app).inc()
        if evaluation.ungrounded_arguments:
            self.ungrounded_tool_arguments.labels(evaluation.app).inc()

    def _citations(self, evaluation: Evaluation) -> None:
        if evaluation.miscited is not None:
            self.cited_answers.labels(evaluation.app).inc()
            if evaluation.miscited:
                self.miscited_answers.labels(evaluation.app).inc()
        if evaluation.dangling_citations:
            self.dangling_citations.labels(evaluation.app).inc(evaluation.dangling_citations)

    def _answerability(self, evaluation: Evaluation) -> None:
        if evaluation.answerable is None or evaluation.answer_refusal is None:
            return
        answerable, refused = str(evaluation.answerable).lower(), str(evaluation.answer_refusal).lower()
        source = evaluation.answerable_source
        self.answerability_cases.labels(evaluation.app, answerable, refused, source).inc()

    def _stages(self, evaluation: Evaluation) -> None:
        for stage, scored in stage_outcomes(evaluation).items():
            self.stage_results.labels(stage, evaluation.app, "scored" if scored else "missing").inc()
            if scored:
                self.stage_last_result.labels(stage).set(evaluation.evaluated_at.timestamp())

    def _custom(self, evaluation: Evaluation) -> None:
        for name, c in evaluation.custom.items():
            labels = (name, c.version, evaluation.app, evaluation.model)
            if c.score is None:  # the reason's kind: timeout, raised, crashed, bad result, error...
                self.custom_missing.labels(*labels, (c.failure_kind or "")[:32]).inc()
                continue
            self.custom_scored.labels(*labels).inc()
            self.custom_score.labels(*labels).inc(c.score)
            self.custom_last_score.labels(name).set(evaluation.evaluated_at.timestamp())

    def _calls(self, evaluation: Evaluation) -> None:
        for call in evaluation.calls:
            if call.judge == "lexical":
                continue
            if call.cached:
                self.judge_cache_hits.labels(call.judge, call.model).inc()
                continue
            if call.attempts <= 0:  # a share of a batched call another interaction made
                continue
            self.judge_calls.labels(call.judge, call.model, call.stage).inc()
            self.judge_retries.labels(call.judge, call.model).inc(call.attempts - 1)
            self.tokens.labels(call.judge, call.model, "in").inc(call.input_tokens)
            self.tokens.labels(call.judge, call.model, "out").inc(call.output_tokens)
            self.cost.labels(call.judge, call.model).inc(call.cost_usd)
            self.judge_latency.labels(call.judge, call.model).observe(call.latency_ms / 1000.0)


def faust_lag(app: Any) -> LagSource:
    """Lag per assigned partition from a faust app's consumer (high-water mark - committed offset)."""

    def rows() -> Iterable[tuple[str, int, int]]:
        consumer = app.consumer
        committed = getattr(consumer, "_committed_offset", {})
        for tp in consumer.assignment():
            high = consumer.highwater(tp)
            done = committed.get(tp) or 0
            if high is not None:
                yield tp.topic, tp.partition, max(0, int(high) - int(done))

    return rows
