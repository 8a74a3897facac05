"""Production to dataset: stored interactions as the JSONL ``groundwatch eval`` reads.

Each line is the interaction as it arrived (question or conversation, contexts, answer, ground truth,
metadata), ``labels`` (people's majority per kind; end users' only when asked) and ``peers``: this
judge's verdict as a 0/1 beside them, named ``<judge>:<its model>``, on the first labeled kind in the
order grounded, correct, answer_refusal (1 = the label's positive class: grounded, correct, a refusal),
and ``custom``: your own evaluators' scores, reasons and versions (schemas/evaluators.py), when it has any.
``groundwatch eval FILE --judge openai`` then measures another judge on the same cases, this one beside.
``groundwatch export`` and the dashboard's "export these interactions" (api/export) both write these
lines (``export_lines``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pipeline.judge_quality import judge_flag
from pipeline.metrics.agreement import consensus
from schemas.evaluation import Evaluation
from schemas.label import LABEL_TARGETS, Label, LabelKind, LabelSource
from schemas.settings import Settings

PEER_KINDS = (LabelKind.GROUNDED, LabelKind.CORRECT, LabelKind.ANSWER_REFUSAL)


def _verdict(e: Evaluation, kind: LabelKind, correct_threshold: float) -> int | None:
    """The judge's verdict as the label's value would be (1 = grounded, correct, a refusal)."""
    flag = judge_flag(e, kind, lambda _: correct_threshold)
    if flag is None:
        return None
    return int(flag) if LABEL_TARGETS[kind].condition_value == 1 else int(not flag)


def export_line(
    e: Evaluation, labels: Sequence[Label], *, correct_threshold: float, include_end_user: bool = False
) -> dict[str, Any] | None:
    """One eval-format line; None when the stored evaluation carries no interaction."""
    if e.interaction is None:
        return None
    line: dict[str, Any] = e.interaction.model_dump(mode="json", exclude_none=True)
    values: dict[str, list[int]] = defaultdict(list)
    for label in labels:
        if label.source is LabelSource.END_USER and not include_end_user:
            continue
        values[label.kind].append(label.value)
    majority = {k: consensus(v) for k, v in values.items()}
    line["labels"] = {str(k): v for k, v in majority.items() if v is not None} or None
    peer_kind = next((k for k in PEER_KINDS if majority.get(k) is not None), None)
    if peer_kind is not None:
        verdict = _verdict(e, peer_kind, correct_threshold)
        if verdict is not None:
            line["peers"] = {f"{e.judge}:{e.judge_model or e.judge}": verdict}
    if line["labels"] is None:
        del line["labels"]
    if e.custom:  # your own evaluators' scores (None: it failed, with why)
        line["custom"] = {name: c.model_dump(mode="json") for name, c in sorted(e.custom.items())}
    return line


def dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False)


def export_lines(
    rows: Iterable[tuple[Evaluation, Sequence[Label]]], settings: Settings
) -> Iterator[dict[str, Any]]:
    """The eval-format lines of stored evaluations with their labels (``LabelStore.export_rows``), each
    judged at its app/model's correct threshold; an evaluation without its interaction gives none."""
    for evaluation, labels in rows:
        threshold = settings.pipeline.threshold_for(
            "answer_entails_ground_truth", evaluation.judge, evaluation.app, evaluation.model
        )
        line = export_line(
            evaluation, labels, correct_threshold=threshold, include_end_user=settings.labels.include_end_user
        )
        if line is not None:
            yield line
