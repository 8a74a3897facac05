"""`groundwatch eval INPUT.jsonl --judge KIND --out report.json`: evaluate a JSONL file offline.

Every valid line is evaluated by the full pipeline (``pipeline.evaluator.Evaluator``) with the judge
``--judge`` names; the per-interaction Evaluations go to a JSONL file beside the report (default
``<out stem>.evaluations.jsonl``): each is appended (and flushed) as soon as it is done, so a run that
is stopped early leaves every finished Evaluation behind; when the run completes the file is rewritten
in input order. With conversations on (``conversations.enabled``), every conversation's outcome goes to
``--conversations`` (default ``<out stem>.conversations.jsonl``), a line each as the stream's
``conversations`` rows hold them (an interaction without a conversation_id is a conversation of one
turn). The report (``pipeline.report.EvalReport``) holds counts, score distributions, calls, tokens,
cost, time per stage and, for lines with ``labels``, ROC AUC and balanced accuracy per label, each with
a 95 % percentile bootstrap interval (``--bootstrap`` resamples of the groups of cases sharing a
question or a passage, 1000 by default, seed 0; 0 = none), printed and in the report.
A bad line or a failed evaluation is listed in the report's
``errors`` with its line number and reason, never dropped silently. Other settings come from the
``GROUNDWATCH_*`` environment (``schemas.settings.Settings``).

``privacy.mode`` (``GROUNDWATCH_PRIVACY__MODE``) masks personal data as the worker does: ``judge``, the
judge sees placeholders and the Evaluations the originals; ``all``, both see placeholders.

``--sampling RULES`` judges only what the sampling rules pick (the others are written unjudged with their
reason); ``--estimate FILE`` prints what judging FILE would take, calling no judge (groundwatch.estimate).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO, get_args

from tqdm import tqdm

from groundwatch import estimate as estimate_cmd
from groundwatch.commands.arg_types import non_negative_int, positive_int
from groundwatch.commands.files import input_file, output_file
from groundwatch.figures import UNDEFINED, defined, fixed
from groundwatch.judging import (
    CHUNK_LINES,
    Here,
    Judged,
    JudgingPool,
    OnDone,
    Workers,
    evaluate_all,
    processes_for,
    relevance_scorer,
)
from pipeline.conversation_judge import ConversationJudge, judge_conversations
from pipeline.conversations import ConversationKey, PairVerdicts, figures_of, rollups_of
from pipeline.custom_evaluators import CustomEvaluators, CustomSummary, open_custom, summarise
from pipeline.dataset import DatasetLine
from pipeline.embeddings import TextEncoder
from pipeline.evaluator import Evaluator
from pipeline.judges.factory import open_judge
from pipeline.metrics.bootstrap import RESAMPLES, Interval
from pipeline.privacy.mask import PrivacyGuard
from pipeline.report import EvalReport, build_report
from pipeline.topic_assignment import open_topics
from pipeline.topic_figures import figures, with_topics
from schemas.conversation import ConversationFigures
from schemas.errors import ConfigError
from schemas.evaluation import Evaluation
from schemas.metrics import CONVERSATION_SCORED, named
from schemas.safe_text import safe_text
from schemas.settings import JudgeKind, Settings
from schemas.topic_model import TopicFigures, TopicRate
from streams import cores
from streams.heap import settle_heap


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, nargs="?", help="JSONL file, one interaction a line")
    parser.add_argument(
        "--judge", choices=get_args(JudgeKind), default=None, help="judge kind (default: settings)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="report JSON to write (required unless --estimate)"
    )
    parser.add_argument(
        "--estimate",
        type=Path,
        default=None,
        metavar="FILE",
        help="print the judge calls, tokens and cost that judging FILE would take, without calling the "
        "judge (with --out: also as JSON there)",
    )
    parser.add_argument(
        "--sampling",
        type=Path,
        default=None,
        metavar="RULES",
        help="sampling rules (YAML/JSON, docs/sampling.md): judge only what they pick "
        "(the others are written unjudged with their reason); with --estimate: the figure after them",
    )
    parser.add_argument(
        "--limit", type=non_negative_int, default=None, help="evaluate only the first N non-blank lines"
    )
    _add_output_files(parser)
    _add_judging(parser)
    parser.add_argument(
        "--relevance",
        action="store_true",
        help="also score embedding relevance (needs the `embeddings` extra)",
    )
    parser.add_argument(
        "--bootstrap",
        type=non_negative_int,
        default=RESAMPLES,
        metavar="N",
        help=f"resamples for the 95%% intervals of AUC and balanced accuracy (default {RESAMPLES}; 0: none)",
    )
    parser.add_argument(
        "--evaluators",
        type=Path,
        default=None,
        metavar="FILE",
        help="your own evaluators (docs/evaluators.md; default: GROUNDWATCH_EVALUATORS__FILE): "
        "each one's rate or mean, failures and reasons in the report; with --estimate: the rubrics priced",
    )
    parser.add_argument(
        "--topics",
        action="store_true",
        help="find the topics of the file's questions (docs/topics.md; the `embeddings` extra): each "
        "evaluation line gets its topic and topic_label, the report each topic's volume and rates "
        "(without it, GROUNDWATCH_TOPICS__MODEL_FILE assigns the topics of a model written before)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_judging(parser: argparse.ArgumentParser) -> None:
    """How many interactions are judged at once, on how many processes."""
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        help="interactions in flight, shared by the judging processes (default: "
        "GROUNDWATCH_KAFKA__STAGE_CONCURRENCY, 128)",
    )
    parser.add_argument(
        "--processes",
        type=positive_int,
        default=None,
        help="judging processes (default: GROUNDWATCH_KAFKA__PROCESSES, else one per CPU core this process "
        f"may use, one with the local judge); at most one per {CHUNK_LINES} lines to judge",
    )


def _add_output_files(parser: argparse.ArgumentParser) -> None:
    """The files beside the report: the evaluations and the conversations."""
    parser.add_argument(
        "--evaluations",
        type=Path,
        default=None,
        help="Evaluations JSONL (default: <out stem>.evaluations.jsonl)",
    )
    parser.add_argument(
        "--conversations",
        type=Path,
        default=None,
        help="every conversation's outcome, a JSON line each as the stream's conversations rows (default: "
        "<out stem>.conversations.jsonl; with conversations on)",
    )


def conversations_path(out: Path, explicit: Path | None) -> Path:
    """Where the conversations' outcomes go: ``--conversations`` or ``<out stem>.conversations.jsonl``."""
    if explicit is not None:
        return explicit
    return out.with_name(f"{out.stem}.conversations.jsonl")


def evaluations_path(out: Path, explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    return out.with_name(f"{out.stem}.evaluations.jsonl")


class EvaluationsFile:
    """The evaluations file as the run goes: each Evaluation's JSON appended (and flushed) as soon as it
    is done, and kept, so that the file is written again in input order at the end without making it
    again."""

    def __init__(self, handle: TextIO) -> None:
        self.handle = handle
        self.texts: dict[str, str] = {}

    def write(self, evaluation: Evaluation, text: str) -> None:
        self.texts[evaluation.interaction_id] = text
        self.handle.write(text + "\n")
        self.handle.flush()

    def in_order(self, evaluations: Iterable[Evaluation]) -> Iterator[str]:
        return (self.texts[e.interaction_id] for e in evaluations)


async def _judge_lines(
    args: argparse.Namespace,
    judge_name: str,
    workers: Workers | None,
    lines: list[DatasetLine],
    here: Here,
    on_done: OnDone,
) -> Judged:
    """The lines judged in this process (``here``), and by the judging processes when there are some,
    with a progress bar; the Evaluator is closed after."""
    bar = tqdm(total=len(lines), desc=f"eval {args.input.name} ({judge_name})", unit="it", disable=args.quiet)
    try:
        settle_heap()  # the worker's collector policy once set up (streams.heap): same cost a line
        if workers is None:
            return await evaluate_all(lines, here.evaluator, here.concurrency, bar, on_done, here.privacy)
        if not bar.disable:
            bar.set_postfix_str(f"{workers.count + 1} processes")
        return await JudgingPool(workers, here).judge(lines, bar, on_done)
    finally:
        bar.close()
        await here.evaluator.aclose()


def start_workers(args: argparse.Namespace, settings: Settings) -> Workers | None:
    """The judging processes beside this one (``--processes``; none for a small file), started before
    anything else so that they open their judges while this process reads the input."""
    with args.input.open("rb") as handle:
        lines = sum(1 for _ in handle)
    processes = processes_for(min(lines, args.limit or lines), args.processes or cores.processes(settings))
    if processes == 1:
        return None
    return Workers(settings, processes - 1, per_process(args, settings, processes))


def per_process(args: argparse.Namespace, settings: Settings, processes: int) -> int:
    """Each process's share of the interactions in flight (``--concurrency``)."""
    return max(1, math.ceil((args.concurrency or settings.kafka.stage_concurrency) / processes))


def masked_unjudged(privacy: PrivacyGuard, evaluation: Evaluation) -> Evaluation:
    """An unjudged evaluation (sampled out) with its interaction as storage sees it."""
    if evaluation.interaction is None:
        return evaluation
    return evaluation.model_copy(update={"interaction": privacy.for_storage(evaluation.interaction)})


async def run_eval(
    args: argparse.Namespace, settings: Settings | None = None, workers: Workers | None = None
) -> EvalReport:
    """The run; ``workers``: judging processes beside this one (``start_workers``), started with
    ``settings`` as given here."""
    settings = estimate_cmd.settings_for(args, settings or Settings())
    dataset = estimate_cmd.read_input(args.input, settings, args.limit)
    to_judge, skipped = estimate_cmd.sampled_lines(dataset.lines, getattr(args, "sampling", None), settings)
    here_share = per_process(args, settings, 1 + (workers.count if workers is not None else 0))
    scorer = relevance_scorer(settings)
    out_evals = evaluations_path(args.out, args.evaluations)
    out_evals.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with out_evals.open("w", encoding="utf-8") as handle:
        written = EvaluationsFile(handle)
        privacy = PrivacyGuard(settings.privacy)
        async with open_judge(settings) as judge:
            custom = open_custom(settings.evaluators, judge)
            topics = open_topics(settings.topics)
            evaluator = Evaluator(judge, settings, relevance_scorer=scorer, custom=custom, topics=topics)
            skipped = [masked_unjudged(privacy, evaluation) for evaluation in skipped]
            for evaluation in skipped:
                written.write(evaluation, evaluation.model_dump_json())
            here = Here(evaluator, privacy, here_share)
            rows, failures = await _judge_lines(args, f"{judge.name}", workers, to_judge, here, written.write)
            wall = time.perf_counter() - started
            report = await build_report(
                generated_at=datetime.now(UTC),
                input_path=str(args.input),
                rows=rows,
                errors=[*dataset.errors, *failures],
                lines_read=dataset.read_lines,
                blank_lines=dataset.blank_lines,
                judge_name=judge.name,
                judge_model=judge.model,
                settings=settings,
                wall_seconds=wall,
                judge=judge,
                bootstrap=getattr(args, "bootstrap", RESAMPLES),
            )
            if custom is not None:
                report = _with_custom_summary(report, custom, rows)
            every = [e for _, e in rows] + list(skipped)
            pair_judge = ConversationJudge(judge, settings.conversations, mask=privacy.text_for_judge)
            judged = await judge_conversations(pair_judge, every) if settings.conversations.enabled else {}
    report = estimate_cmd.with_sampling(report, args, skipped)
    if getattr(args, "topics", False):
        rows, skipped, report = await _with_topics(rows, skipped, report, settings)
    elif settings.topics.model_file is not None:  # each was assigned its topic by the model, as judged
        report = report.model_copy(update={"topics": figures([e for _, e in rows])})
    if settings.conversations.enabled:
        where = conversations_path(args.out, getattr(args, "conversations", None))
        report = _with_conversations(report, settings, every, judged, where)
    ordered = estimate_cmd.in_input_order(dataset.lines, rows, skipped)
    texts = (e.model_dump_json() for e in ordered) if report.topics is not None else written.in_order(ordered)
    _write_outputs(args.out, report, out_evals, texts)
    return report


async def _with_topics(
    rows: list[tuple[DatasetLine, Evaluation]],
    skipped: list[Evaluation],
    report: EvalReport,
    settings: Settings,
) -> tuple[list[tuple[DatasetLine, Evaluation]], list[Evaluation], EvalReport]:
    """Every evaluation with its topic (fitted on the file's questions, in a thread), and the report with
    each topic's figures."""
    encoder = TextEncoder()
    every = [e for _, e in rows] + list(skipped)
    updated, _ = await asyncio.to_thread(with_topics, every, settings.topics, encoder, report.generated_at)
    done = updated[: len(rows)]
    rows = [(line, e) for (line, _), e in zip(rows, done, strict=True)]
    return rows, updated[len(rows) :], report.model_copy(update={"topics": figures(updated)})


def _write_outputs(out: Path, report: EvalReport, evaluations_file: Path, evaluations: Iterable[str]) -> None:
    """The complete run: the evaluations file rewritten in input order (each Evaluation's JSON), then the
    report."""
    with evaluations_file.open("w", encoding="utf-8") as handle:
        handle.writelines(text + "\n" for text in evaluations)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")


def _with_conversations(
    report: EvalReport,
    settings: Settings,
    every: Sequence[Evaluation],
    judged: Mapping[ConversationKey, PairVerdicts],
    path: Path,
) -> EvalReport:
    """The report with the file's conversation figures, and every conversation's outcome written to
    ``path`` (a line each, in the order of the stream's table); ``judged``: the LLM judge's re-asks and
    contradictions by conversation (``conversations.judge`` llm)."""
    rolled = rollups_of(every, settings.conversations.reask_similarity, judged)
    rolled.sort(key=lambda c: (c.app, c.model, c.conversation_id, c.interaction_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(c.model_dump_json() + "\n" for c in rolled)
    return report.model_copy(update={"conversations": figures_of(rolled, judged)})


def _with_custom_summary(
    report: EvalReport, custom: CustomEvaluators, rows: Sequence[tuple[DatasetLine, Evaluation]]
) -> EvalReport:
    """The report with the custom evaluators' summary (``custom``)."""
    summaries = summarise(custom.loaded, (e for _, e in rows))
    return report.model_copy(update={"custom": {k: v.model_dump(mode="json") for k, v in summaries.items()}})


def summary(report: EvalReport) -> str:
    """The printed report: counts and cost, then per label each score's AUC and balanced accuracy with
    their 95 % bootstrap intervals (the best threshold's figure is in-sample), peers beside ours."""
    lines = [
        f"{report.evaluated} evaluated, {report.failed} errors, {report.wall_seconds:.1f}s, "
        f"judge {report.judge} ({report.judge_model}), {report.calls.judge_calls} judge calls, "
        f"{report.calls.input_tokens}+{report.calls.output_tokens} tokens, ${report.calls.cost_usd:.4f}"
    ]
    resamples = report.settings.get("bootstrap_resamples")
    if report.labels and resamples:
        lines.append(
            f"  [lo, hi] = 95% percentile bootstrap interval ({resamples} resamples of the cases, "
            "whole question/passage groups)"
        )
    for label, block in report.labels.items():
        for item in [block.primary, *block.others]:
            best = item.best
            lines.append(
                f"  {label} vs {item.score}: n={item.n} AUC={_fmt(item.roc_auc, item.roc_auc_ci)} "
                f"bacc@{item.threshold:g}={_fmt(item.balanced_accuracy, item.balanced_accuracy_ci)}"
                + (
                    f" in-sample best bacc={_fmt(best.balanced_accuracy, item.best_balanced_accuracy_ci)}"
                    f"@{best.threshold:.3g}"
                    if best
                    else ""
                )
            )
        if block.peers:
            p = block.peers
            peers = ", ".join(f"{k}={_fmt(v, p.peers_ci.get(k))}" for k, v in p.peers.items())
            ours = _fmt(p.ours_balanced_accuracy, p.ours_balanced_accuracy_ci)
            lines.append(f"  peers on {p.n} cases (bacc): ours={ours}; {peers}")
    for line in (
        metric_line("answers", ANSWER_METRICS, report.metrics),
        metric_line("tools", TOOL_METRICS, report.metrics) if report.metrics.get("mean_tool_calls") else "",
        metric_line("citations", CITATION_METRICS, report.metrics),
    ):
        if line:
            lines.append(line)
    if report.conversations is not None and report.conversations.conversations:
        lines.append(conversation_summary(report.conversations))
    if report.topics:
        lines.extend(topic_lines(report.topics))
    if report.custom:
        lines.append("  your evaluators:")
        lines.extend(custom_lines({k: CustomSummary.model_validate(v) for k, v in report.custom.items()}))
    for error in report.errors[:5]:
        lines.append(f"  line {error.line}: [{error.stage}] {error.reason}")
    if len(report.errors) > 5:
        lines.append(f"  ... {len(report.errors) - 5} more errors in the report")
    return "\n".join(lines)


#: topics printed by ``summary`` (all are in the report)
PRINTED_TOPICS = 10


def topic_lines(topics: Sequence[TopicFigures]) -> list[str]:
    """The printed topics: the ``PRINTED_TOPICS`` with the highest rates (hallucination, then refusal,
    then no evidence; an undefined rate counts as 0), each with its volume and its three rates (95 %
    Wilson intervals)."""

    def rate(t: TopicFigures) -> tuple[float, ...]:
        return tuple(-(defined(r.value) or 0.0) for r in t.rates.values())  # (undefined: as 0)

    def shown(name: str, r: TopicRate) -> str:
        bounds = f" [{r.low:.3f}, {r.high:.3f}]" if r.low is not None and r.high is not None else ""
        return f"{named(name).label.lower()} {_fmt(r.value)}{bounds}"

    lines = [f"  {len(topics)} topics ([lo, hi]: 95% Wilson); highest rates first:"]
    for t in sorted(topics, key=lambda t: (rate(t), -t.interactions))[:PRINTED_TOPICS]:
        head = f"    {t.topic} {safe_text(t.label)[:60]}: {t.interactions} ({t.share:.0%}); "
        lines.append(head + ", ".join(shown(name, r) for name, r in t.rates.items()))
    return lines


def custom_lines(summaries: Mapping[str, CustomSummary]) -> list[str]:
    """The printed block of the custom evaluators (``--evaluators``): per evaluator its value, how many it
    scored and failed to, its agreement with the lines' labels, a few of its reasons."""
    lines = []
    for s in summaries.values():
        what = "rate" if s.kind == "rate" else "mean"
        lines.append(
            f"  {s.metric} v{s.version}: {what} {fixed(s.value)} over {s.scored} scored, {s.missing} missing"
            + (" (" + ", ".join(f"{k} {v}" for k, v in s.missing_reasons.items()) + ")" if s.missing else "")
        )
        if s.agreement is not None:
            ba, kappa = s.agreement.balanced_accuracy, s.agreement.kappa
            bounds = defined(ba.low) is not None and defined(ba.high) is not None
            interval = f" [{fixed(ba.low)}, {fixed(ba.high)}]" if bounds else ""
            lines.append(
                f"    against {s.agreement.cases} labels: balanced accuracy {fixed(ba.value)}{interval}, "
                f"kappa {fixed(kappa.value)}"
            )
        lines.extend(f"    {reason[:160]}" for reason in s.reasons[:3])
    return lines


#: the catalogue's metrics printed on the summary's "answers", "tools" (when an interaction called a tool)
#: and "citations" (when an answer cites) lines, named by their catalogue labels as on the dashboards
ANSWER_METRICS = ("hallucination_rate", "answer_refusal_rate", "no_evidence_rate")
TOOL_METRICS = ("mean_tool_calls", "tool_error_rate", "ungrounded_arguments_rate")
CITATION_METRICS = (
    "mean_citation_recall", "mean_citation_precision", "mean_uncited_statements", "miscited_rate",
    "dangling_citation_rate",
)  # fmt: skip


def metric_line(title: str, names: tuple[str, ...], metrics: dict[str, float | None]) -> str:
    """One line of the file's figures of these metrics; '' when none is defined."""
    if all(defined(metrics.get(name)) is None for name in names):
        return ""
    parts = [f"{named(name).label.lower()} {_fmt(metrics.get(name))}" for name in names]
    return f"  {title}: " + ", ".join(parts)


def conversation_summary(c: ConversationFigures) -> str:
    """One line: the conversation metrics of the catalogue and the worst conversation."""
    parts = [f"{m.label.lower()} {_fmt(c.metrics.get(m.name))}" for m in CONVERSATION_SCORED]
    line = f"  {c.conversations} conversations ({c.multi_turn} with a conversation_id): " + ", ".join(parts)
    if c.worst:
        w = c.worst[0]
        line += f"; worst {safe_text(w.conversation_id)[:80]} (turn {safe_text(w.worst_turn_id)[:80]})"
    if c.judge_calls:
        line += f"; re-asks and contradictions: {c.judge_calls} judge calls, ${c.judge_cost_usd:.4f}"
    return line


def _fmt(value: float | None, interval: Interval | None = None) -> str:
    if defined(value) is None:
        return UNDEFINED
    return fixed(value) + (f" {interval.text()}" if interval is not None else "")


def run(args: argparse.Namespace) -> int:
    if args.estimate is not None:
        return estimate_cmd.run_estimate(args)
    if args.input is None or args.out is None:
        raise ConfigError("give INPUT and --out (or --estimate FILE)")
    input_file(args.input)
    output_file(args.out, "--out", args.input)
    output_file(evaluations_path(args.out, args.evaluations), "--evaluations", args.input)
    output_file(conversations_path(args.out, args.conversations), "--conversations", args.input)
    settings = estimate_cmd.settings_for(args, Settings())
    workers = start_workers(args, settings)
    with workers or nullcontext():
        report = asyncio.run(run_eval(args, settings, workers))
    print(summary(report), file=sys.stderr)
    print(
        json.dumps(
            {
                "report": str(args.out),
                "evaluations": str(evaluations_path(args.out, args.evaluations)),
                **(
                    {"conversations": str(conversations_path(args.out, args.conversations))}
                    if report.conversations is not None
                    else {}
                ),
            }
        )
    )
    # no line could be evaluated (each bad input, or the judge failed on each): the errors are named above
    return 2 if report.failed and not report.evaluated else 0
