"""`groundwatch eval --estimate FILE [--sampling RULES]` and the sampling of `groundwatch eval --sampling`.

The estimate (``pipeline.estimate``) prints the judge calls, input/output tokens and cost that judging the
file with the configured judge (``--judge``) would take, from the requests it would actually send, and
calls no judge. With ``--sampling RULES`` only the interactions the rules pick are counted (the default
rate is ``GROUNDWATCH_SAMPLING__DEFAULT_RATE``; budgets are not applied: they depend on time). With
``--out`` the estimate is also written as JSON.

``groundwatch eval INPUT --out R --sampling RULES`` judges only the interactions the rules pick; the others
are written to the evaluations JSONL unjudged (``judged: false``, ``skip_reason``) and counted in the
report's ``settings.sampling``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundwatch.commands.files import input_file, output_file
from pipeline.clock import SYSTEM_CLOCK
from pipeline.dataset import Dataset, DatasetLine, read_dataset
from pipeline.estimate import CostEstimate, estimate, summary
from pipeline.report import EvalReport
from pipeline.sampling import Sampler, skipped_evaluation
from schemas.errors import ConfigError
from schemas.evaluation import Evaluation
from schemas.settings import Settings


def sampled_lines(
    lines: Sequence[DatasetLine], rules: Path | None, settings: Settings
) -> tuple[list[DatasetLine], list[Evaluation]]:
    """(lines to judge, unjudged Evaluations of the others) under the rules file; all lines without one."""
    if rules is None:
        return list(lines), []
    sampler = Sampler.from_files(rules, settings.sampling.default_rate)
    judged: list[DatasetLine] = []
    skipped: list[Evaluation] = []
    for line in lines:
        decision = sampler.decide(line.interaction, budgets=False)
        if decision.judge:
            judged.append(line)
        else:
            skipped.append(
                skipped_evaluation(line.interaction, decision.reason, settings.judge.kind, SYSTEM_CLOCK.now())
            )
    return judged, skipped


def with_sampling(report: EvalReport, args: argparse.Namespace, skipped: Sequence[Evaluation]) -> EvalReport:
    """The report with what the sampling rules skipped (``settings.sampling``), when there were rules."""
    rules = getattr(args, "sampling", None)
    if rules is None:
        return report
    reasons = Counter(str(e.skip_reason) for e in skipped)
    sampling: dict[str, Any] = {"rules": str(rules), "skipped": len(skipped), "by_reason": dict(reasons)}
    return report.model_copy(update={"settings": {**report.settings, "sampling": sampling}})


def in_input_order(
    lines: Sequence[DatasetLine],
    rows: Sequence[tuple[DatasetLine, Evaluation]],
    skipped: Sequence[Evaluation],
) -> list[Evaluation]:
    """Judged and unjudged Evaluations in the order of their lines (failed lines have none)."""
    by_id = {e.interaction_id: e for e in skipped}
    by_line = {line.line: evaluation for line, evaluation in rows}
    out = []
    for line in lines:
        found = by_line.get(line.line) or by_id.get(line.interaction.interaction_id)
        if found is not None:
            out.append(found)
    return out


def read_input(path: Path, settings: Settings, limit: int | None) -> Dataset:
    """The interactions JSONL ``groundwatch eval`` judges or prices; ConfigError when it holds no line
    that is not blank (an empty file is a mistake, not a report of nothing)."""
    dataset = read_dataset(path, settings.limits, limit)
    if not dataset.read_lines:
        raise ConfigError(f"{path} holds no interaction (no line that is not blank)")
    return dataset


async def run_estimate_async(args: argparse.Namespace, settings: Settings) -> CostEstimate:
    dataset = read_input(args.estimate, settings, args.limit)
    sampler = None
    if args.sampling is not None:
        sampler = Sampler.from_files(args.sampling, settings.sampling.default_rate)
    result = await estimate(
        [line.interaction for line in dataset.lines],
        settings,
        sampler=sampler,
        concurrency=args.concurrency or settings.kafka.stage_concurrency,
        source=str(args.estimate),
    )
    return result.model_copy(
        update={
            "invalid_lines": len(dataset.errors),
            "sampling_rules": str(args.sampling) if args.sampling is not None else None,
        }
    )


def settings_for(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with ``groundwatch eval``'s ``--judge``, ``--relevance`` and ``--evaluators`` applied."""
    if args.judge:
        settings = settings.model_copy(
            update={"judge": settings.judge.model_copy(update={"kind": args.judge})}, deep=True
        )
    if args.relevance:
        settings = settings.model_copy(
            update={"pipeline": settings.pipeline.model_copy(update={"relevance": True})}, deep=True
        )
    if getattr(args, "evaluators", None) is not None:
        settings = settings.with_changes(evaluators={"file": args.evaluators})
    return settings


def run_estimate(args: argparse.Namespace, settings: Settings | None = None) -> int:
    input_file(args.estimate)
    if args.out is not None:
        output_file(args.out, "--out", args.estimate)
    if args.input is not None:
        raise ConfigError("give INPUT or --estimate FILE, not both")
    result = asyncio.run(run_estimate_async(args, settings_for(args, settings or Settings())))
    print(summary(result))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if not result.interactions:
        return 2  # no line could be read as an interaction: bad input
    return 1 if result.failed else 0
