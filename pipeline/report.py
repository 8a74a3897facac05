"""The report of an offline evaluation run (``groundwatch eval``): counts, distributions, cost, accuracy.

Accuracy against human labels (an input line's ``labels``), one block per label:

- ``grounded`` (1 = the answer is supported by its context): scored by ``context_entailment``
  (primary) and ``grounded_precision``;
- ``correct`` (1 = the answer is acceptable against the ground truth): ``answer_entails_ground_truth``
  (primary: question end + answer => ground truth, docs/method.md; with a ground truth of alternatives,
  any alternative will do, see ``pipeline.alternatives``), then ``ground_truth_entails_answer`` (the
  other direction) and their mean ``agreement`` as secondary lines;
- ``answer_refusal`` (1 = the answer is a refusal): the ``answer_refusal`` flag as 1/0.

For each: ROC AUC, balanced accuracy at the operating threshold (``PipelineSettings.threshold_for``: the
judge's calibrated default unless ``hallucination_threshold`` / ``correct_threshold`` is set; 0.5 for
flags; positive when ``score >= threshold``), and the best threshold by Youden J with its balanced
accuracy (an in-sample figure: the threshold is chosen on the same cases). Cases whose score is None
(e.g. no context) are counted as ``unscored`` and left out.
Lines with ``peers`` (other detectors' 1/0 verdicts, 1 = positive class) get each peer's balanced accuracy
on the same cases, beside ours on exactly those cases.

Every ROC AUC and balanced accuracy comes with a 95 % percentile bootstrap interval
(``pipeline.metrics.bootstrap``: ``bootstrap`` resamples, 1000 by default, seed 0, of whole groups of
cases sharing a question or a source passage, ``pipeline.metrics.groups``), so a figure from a few
hundred labeled cases shows how firm it is. The best
threshold's interval is that of the balanced accuracy at that threshold, which was chosen on the same
cases: it is optimistic, the operating threshold's is not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from pipeline.answerability import answerable_from, nothing_retrieved
from pipeline.dataset import DatasetLine, LineError
from pipeline.judges.base import Judge
from pipeline.metrics.bootstrap import (
    RESAMPLES,
    SEED,
    Interval,
    auc_interval,
    balanced_accuracy_interval,
)
from pipeline.metrics.classification import (
    ThresholdChoice,
    balanced_accuracy,
    balanced_accuracy_of,
    best_threshold,
    roc_auc,
)
from pipeline.metrics.groups import group_keys
from pipeline.metrics.trust_eval import TrustEvalCase, TrustEvalResult, trust_eval
from schemas.conversation import ConversationFigures
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.label import LABEL_TARGETS
from schemas.metrics import SCORED, scored_values
from schemas.settings import Settings
from schemas.topic_model import TopicFigures

ScoreGetter = Callable[[Evaluation], float | None]


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


def _agreement(e: Evaluation) -> float | None:
    parts = [v for v in (e.ground_truth_entails_answer, e.answer_entails_ground_truth) if v is not None]
    return sum(parts) / len(parts) if parts else None


SCORES: dict[str, ScoreGetter] = {
    "context_entailment": lambda e: e.context_entailment,
    "ground_truth_entails_answer": lambda e: e.ground_truth_entails_answer,
    "answer_entails_ground_truth": lambda e: e.answer_entails_ground_truth,
    "agreement": _agreement,
    "grounded_precision": lambda e: e.grounded_precision,
    "relevance": lambda e: e.relevance,
    "answer_refusal": lambda e: _flag(e.answer_refusal),
}

#: label -> the scores measured against it, the primary first (``schemas.label.LABEL_TARGETS``)
LABEL_SCORES: dict[str, list[str]] = {
    str(target.kind): list(target.scores) for target in LABEL_TARGETS.values() if target.scores
}
FLAG_SCORES = {"answer_refusal"}
DISTRIBUTION_SCORES = [
    "context_entailment",
    "ground_truth_entails_answer",
    "answer_entails_ground_truth",
    "grounded_precision",
    "relevance",
]


class Histogram(BaseModel):
    edges: list[float]
    counts: list[int]


class Distribution(BaseModel):
    n: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    quantiles: dict[str, float] = Field(default_factory=dict)  # p05, p25, p50, p75, p95
    histogram: Histogram | None = None


class ScoreVsLabel(BaseModel):
    score: str
    n: int  # scored cases
    positives: int
    unscored: int
    roc_auc: float | None
    threshold: float
    balanced_accuracy: float | None
    best: ThresholdChoice | None
    # 95 % percentile bootstrap intervals (None when not computed or undefined)
    roc_auc_ci: Interval | None = None
    balanced_accuracy_ci: Interval | None = None
    best_balanced_accuracy_ci: Interval | None = None  # in-sample: the threshold saw these cases


class PeerComparison(BaseModel):
    n: int  # cases with peers and our score
    ours_balanced_accuracy: float | None
    ours_best_balanced_accuracy: float | None
    ours_roc_auc: float | None
    peers: dict[str, float | None]  # peer -> balanced accuracy on the same cases
    peer_cases: dict[str, int]
    ours_balanced_accuracy_ci: Interval | None = None
    ours_roc_auc_ci: Interval | None = None
    peers_ci: dict[str, Interval | None] = Field(default_factory=dict)


class LabelReport(BaseModel):
    label: str
    cases: int  # evaluated lines carrying this label
    primary: ScoreVsLabel
    others: list[ScoreVsLabel] = Field(default_factory=list)
    peers: PeerComparison | None = None


class StageTime(BaseModel):
    total_seconds: float
    mean_seconds: float
    n: int


class CallSummary(BaseModel):
    calls: int  # JudgeCall records (LLM requests, cache hits, lexical decisions)
    judge_calls: int  # calls that reached the judge's model
    cached: int
    by_stage: dict[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float
    per_interaction: dict[str, float]  # calls, judge_calls, input_tokens, output_tokens, cost_usd


class EvalReport(BaseModel):
    input: str
    judge: str
    judge_model: str
    generated_at: datetime
    wall_seconds: float
    interactions_per_second: float | None
    lines_read: int
    blank_lines: int
    evaluated: int
    failed: int  # lines listed in errors (bad input or evaluation failure)
    errors: list[LineError]
    counts: dict[str, int]
    scores: dict[str, Distribution]
    judge_latency_ms: Distribution
    calls: CallSummary
    stage_seconds: dict[str, StageTime]
    labels: dict[str, LabelReport]
    trust_eval: TrustEvalResult | None = None
    metrics: dict[str, float | None] = Field(
        default_factory=dict,
        description="each rate and mean of the metric catalogue over the file's judged interactions, pooled "
        "as one window would pool them (citation recall and precision, miscited rate, ...); None: no "
        "interaction had it",
    )
    settings: dict[str, Any]
    conversations: ConversationFigures | None = Field(
        None, description="the conversation metrics of the file's conversations (None: conversations off)"
    )
    # your own evaluators (``--evaluators``; pipeline.custom_evaluators.CustomSummary as JSON), by name
    custom: dict[str, dict[str, Any]] = Field(default_factory=dict)
    topics: list[TopicFigures] | None = Field(
        None, description="with --topics: each topic's id, name, volume, share and rates; None without"
    )


def distribution(values: Sequence[float], bins: int = 10, lo: float = 0.0, hi: float = 1.0) -> Distribution:
    """Mean, std, min, max, quantiles and a histogram over [lo, hi] (values outside go to the end bins)."""
    if not values:
        return Distribution(n=0)
    arr = np.asarray(values, dtype=float)
    qs = np.quantile(arr, [0.05, 0.25, 0.5, 0.75, 0.95])
    lo_, hi_ = min(lo, float(arr.min())), max(hi, float(arr.max()))
    counts, edges = np.histogram(np.clip(arr, lo_, hi_), bins=bins, range=(lo_, hi_))
    return Distribution(
        n=int(arr.size),
        mean=float(arr.mean()),
        std=float(arr.std()),
        min=float(arr.min()),
        max=float(arr.max()),
        quantiles={k: float(v) for k, v in zip(("p05", "p25", "p50", "p75", "p95"), qs, strict=True)},
        histogram=Histogram(edges=[float(e) for e in edges], counts=[int(c) for c in counts]),
    )


def score_vs_label(
    name: str,
    pairs: Sequence[tuple[int, float | None]],
    threshold: float,
    bootstrap: int = RESAMPLES,
    groups: Sequence[int] | None = None,
) -> tuple[ScoreVsLabel, list[int]]:
    """The score's accuracy against the label, with ``bootstrap`` resamples for the intervals (0: none;
    whole ``groups`` resampled when given, one per pair); also the indices of the scored pairs."""
    kept = [i for i, (_, s) in enumerate(pairs) if s is not None]
    y = [pairs[i][0] for i in kept]
    s = [float(pairs[i][1]) for i in kept]  # type: ignore[arg-type]
    g = [groups[i] for i in kept] if groups is not None else None
    best = best_threshold(y, s) if kept else None
    result = ScoreVsLabel(
        score=name,
        n=len(kept),
        positives=sum(y),
        unscored=len(pairs) - len(kept),
        roc_auc=roc_auc(y, s) if kept else None,
        threshold=threshold,
        balanced_accuracy=balanced_accuracy(y, s, threshold) if kept else None,
        best=best,
        roc_auc_ci=auc_interval(y, s, resamples=bootstrap, seed=SEED, groups=g),
        balanced_accuracy_ci=balanced_accuracy_interval(
            y, s, threshold, resamples=bootstrap, seed=SEED, groups=g
        ),
        best_balanced_accuracy_ci=balanced_accuracy_interval(
            y, s, best.threshold, resamples=bootstrap, seed=SEED, groups=g
        )
        if best
        else None,
    )
    return result, kept


def _peer_comparison(
    rows: Sequence[tuple[DatasetLine, Evaluation]],
    label: str,
    getter: ScoreGetter,
    threshold: float,
    bootstrap: int = RESAMPLES,
    groups: Sequence[int] | None = None,
) -> PeerComparison | None:
    cases = []
    for i, (line, evaluation) in enumerate(rows):
        peers = line.interaction.metadata.get("peers")
        score = getter(evaluation)
        if isinstance(peers, dict) and peers and score is not None:
            group = groups[i] if groups is not None else i
            cases.append((line.interaction.labels[label], score, peers, group))  # type: ignore[index]
    if not cases:
        return None
    y = [c[0] for c in cases]
    s = [c[1] for c in cases]
    g = [c[3] for c in cases]
    names = sorted({name for c in cases for name in c[2]})
    peer_bacc: dict[str, float | None] = {}
    peer_cases: dict[str, int] = {}
    peer_ci: dict[str, Interval | None] = {}
    for name in names:
        have = [(c[0], int(c[2][name]), c[3]) for c in cases if c[2].get(name) in (0, 1, True, False)]
        peer_cases[name] = len(have)
        hy, hp, hg = [h[0] for h in have], [float(h[1]) for h in have], [h[2] for h in have]
        peer_bacc[name] = balanced_accuracy_of(hy, [h[1] for h in have]) if have else None
        peer_ci[name] = balanced_accuracy_interval(hy, hp, 0.5, resamples=bootstrap, seed=SEED, groups=hg)
    best = best_threshold(y, s)
    return PeerComparison(
        n=len(cases),
        ours_balanced_accuracy=balanced_accuracy(y, s, threshold),
        ours_best_balanced_accuracy=best.balanced_accuracy if best else None,
        ours_roc_auc=roc_auc(y, s),
        peers=peer_bacc,
        peer_cases=peer_cases,
        ours_balanced_accuracy_ci=balanced_accuracy_interval(
            y, s, threshold, resamples=bootstrap, seed=SEED, groups=g
        ),
        ours_roc_auc_ci=auc_interval(y, s, resamples=bootstrap, seed=SEED, groups=g),
        peers_ci=peer_ci,
    )


def label_reports(
    rows: Sequence[tuple[DatasetLine, Evaluation]], settings: Settings, bootstrap: int = RESAMPLES
) -> dict[str, LabelReport]:
    """One block per label the rows carry; ``bootstrap`` resamples for the intervals (0: none)."""
    out: dict[str, LabelReport] = {}
    for label, score_names in LABEL_SCORES.items():
        labeled = [
            (line, ev)
            for line, ev in rows
            if line.interaction.labels is not None and line.interaction.labels.get(label) in (0, 1)
        ]
        if not labeled:
            continue
        groups = case_groups([line for line, _ in labeled])
        results = []
        for name in score_names:
            kind = settings.judge.kind
            threshold = 0.5 if name in FLAG_SCORES else settings.pipeline.threshold_for(name, kind)
            getter = SCORES[name]
            pairs = [(line.interaction.labels[label], getter(ev)) for line, ev in labeled]  # type: ignore[index]
            result, _ = score_vs_label(name, pairs, threshold, bootstrap, groups)
            results.append(result)
        primary = results[0]
        out[label] = LabelReport(
            label=label,
            cases=len(labeled),
            primary=primary,
            others=results[1:],
            peers=_peer_comparison(
                labeled, label, SCORES[score_names[0]], primary.threshold, bootstrap, groups
            ),
        )
    return out


def case_groups(lines: Sequence[DatasetLine]) -> list[int]:
    """A group per line: lines sharing a question or a source passage (``pipeline.metrics.groups``)."""
    return group_keys(
        [line.interaction.question for line in lines],
        [line.interaction.contexts[0].text if line.interaction.contexts else "" for line in lines],
    )


def gold_answers(line: DatasetLine) -> list[str]:
    """Short gold answers: the ``gold_answers`` field, else a ground truth written as ``a | b | c``."""
    meta = line.interaction.metadata.get("gold_answers")
    if isinstance(meta, list) and all(isinstance(g, str) for g in meta):
        return [g for g in meta if g.strip()]
    gt = line.interaction.ground_truth or ""
    if " | " in gt:
        return [g.strip() for g in gt.split(" | ") if g.strip()]
    return []


def trust_eval_case(
    line: DatasetLine, evaluation: Evaluation, no_evidence_unanswerable: bool
) -> TrustEvalCase | None:
    """A Trust-Eval case when the pipeline decided about refusal; answerability as the stream decides it
    (``pipeline.answerability.answerable_from``: an ``answerable`` label, else a ground truth that is not a
    refusal, else, with ``pipeline.no_evidence_unanswerable``, no evidence at all makes it unanswerable)."""
    if evaluation.answer_refusal is None:
        return None
    nothing = nothing_retrieved(line.interaction.contexts, evaluation.evidence, no_evidence_unanswerable)
    answerable, _ = answerable_from(line.interaction.labels, evaluation.ground_truth_refusal, nothing)
    return TrustEvalCase(
        answer=line.interaction.answer,
        refused=evaluation.answer_refusal,
        answerable=answerable,
        gold_answers=gold_answers(line),
        passages=[p.text for p in line.interaction.contexts],
    )


def _call_summary(evaluations: Sequence[Evaluation]) -> CallSummary:
    by_stage: dict[str, int] = defaultdict(int)
    cached = calls = 0
    for e in evaluations:
        for call in e.calls:
            calls += 1
            by_stage[call.stage] += 1
            cached += int(call.cached)
    n = len(evaluations) or 1
    judge_calls = sum(e.judge_calls for e in evaluations)
    input_tokens = sum(e.input_tokens for e in evaluations)
    output_tokens = sum(e.output_tokens for e in evaluations)
    cost = sum(e.cost_usd for e in evaluations)
    return CallSummary(
        calls=calls,
        judge_calls=judge_calls,
        cached=cached,
        by_stage=dict(sorted(by_stage.items())),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost,
        per_interaction={
            "calls": calls / n,
            "judge_calls": judge_calls / n,
            "input_tokens": input_tokens / n,
            "output_tokens": output_tokens / n,
            "cost_usd": cost / n,
        },
    )


def catalogue_figures(evaluations: Sequence[Evaluation]) -> dict[str, float | None]:
    """The catalogue's rates and means over the evaluations, as a window pools its rows."""
    values: dict[str, list[float]] = {m.name: [] for m in SCORED}
    for e in evaluations:
        for metric, value in scored_values(EvalRow.from_evaluation(e)):
            values[metric.name].append(value)
    return {name: (sum(v) / len(v) if v else None) for name, v in values.items()}


def _counts(evaluations: Sequence[Evaluation]) -> dict[str, int]:
    return {
        "interactions": len(evaluations),
        "with_context": sum(1 for e in evaluations if e.context_entailment is not None),
        "with_ground_truth": sum(1 for e in evaluations if e.ground_truth_entails_answer is not None),
        "answer_refusals": sum(1 for e in evaluations if e.answer_refusal),
        "ground_truth_refusals": sum(1 for e in evaluations if e.ground_truth_refusal),
        "answerability_known": sum(1 for e in evaluations if e.answerable is not None),
        "over_refusals": sum(1 for e in evaluations if e.over_refusal),
        "answered_unanswerable": sum(1 for e in evaluations if e.answered_unanswerable),
        "hallucinations": sum(1 for e in evaluations if e.hallucination),
        "incomplete": sum(1 for e in evaluations if not e.complete),
        "unsupported_claims": sum(len(e.unsupported_claims) for e in evaluations),
    }


def _stage_seconds(evaluations: Sequence[Evaluation]) -> dict[str, StageTime]:
    stage_totals: dict[str, list[float]] = defaultdict(list)
    for e in evaluations:
        for stage, seconds in e.stage_seconds.items():
            stage_totals[stage].append(seconds)
    return {
        stage: StageTime(total_seconds=sum(v), mean_seconds=sum(v) / len(v), n=len(v))
        for stage, v in sorted(stage_totals.items())
    }


def _settings_summary(settings: Settings, bootstrap: int) -> dict[str, Any]:
    """The settings that shaped the figures, as recorded in the report."""
    kind = settings.judge.kind
    return {
        "judge_kind": settings.judge.kind,
        "judge_model": settings.judge.model,
        "hallucination_threshold": settings.pipeline.threshold_for("context_entailment", kind),
        "correct_threshold": settings.pipeline.threshold_for("answer_entails_ground_truth", kind),
        "nli_mode": settings.pipeline.nli_mode,
        "refusal_mode": settings.pipeline.refusal_mode,
        "refusal_sentences": settings.pipeline.refusal_sentences,
        "pronoun_replacement": settings.pipeline.pronoun_replacement,
        "cascade_llm_pairs": list(settings.judge.cascade_llm_pairs),
        "cascade_unsure": [settings.judge.cascade_unsure_low, settings.judge.cascade_unsure_high],
        "cascade_ground_truth_unsure": [
            settings.judge.cascade_ground_truth_unsure_low,
            settings.judge.cascade_ground_truth_unsure_high,
        ],
        "bootstrap_resamples": bootstrap,
        "bootstrap_seed": SEED,
    }


async def build_report(
    *,
    input_path: str,
    rows: Sequence[tuple[DatasetLine, Evaluation]],
    errors: Sequence[LineError],
    lines_read: int,
    blank_lines: int,
    judge_name: str,
    judge_model: str,
    settings: Settings,
    wall_seconds: float,
    generated_at: datetime,
    judge: Judge | None = None,
    bootstrap: int = RESAMPLES,
) -> EvalReport:
    """Build the report; ``judge`` (optional) scores Trust-Eval citations when answers carry [n] markers;
    ``bootstrap`` resamples for the intervals of the label figures (0: none)."""
    evaluations = [ev for _, ev in rows]
    scores = {
        name: distribution([v for v in (SCORES[name](e) for e in evaluations) if v is not None])
        for name in DISTRIBUTION_SCORES
    }
    no_evidence = settings.pipeline.no_evidence_unanswerable
    cases = [c for c in (trust_eval_case(line, ev, no_evidence) for line, ev in rows) if c is not None]
    trust = None
    if cases and (any(c.answerable is not None for c in cases) or any(c.gold_answers for c in cases)):
        trust = await trust_eval(
            cases, judge, settings.pipeline.threshold_for("context_entailment", settings.judge.kind)
        )
    latency_max = max([e.judge_latency_ms for e in evaluations], default=0.0)
    return EvalReport(
        input=input_path,
        judge=judge_name,
        judge_model=judge_model,
        generated_at=generated_at,
        wall_seconds=wall_seconds,
        interactions_per_second=(len(evaluations) / wall_seconds) if wall_seconds > 0 else None,
        lines_read=lines_read,
        blank_lines=blank_lines,
        evaluated=len(evaluations),
        failed=len(errors),
        errors=sorted(errors, key=lambda e: e.line),
        counts=_counts(evaluations),
        scores=scores,
        judge_latency_ms=distribution([e.judge_latency_ms for e in evaluations], hi=max(latency_max, 1.0)),
        calls=_call_summary(evaluations),
        stage_seconds=_stage_seconds(evaluations),
        labels=label_reports(rows, settings, bootstrap),
        trust_eval=trust,
        metrics=catalogue_figures(evaluations),
        settings=_settings_summary(settings, bootstrap),
    )
