"""How the answerability rule (``pipeline.answerability``) decides on the labeled sets, with
``pipeline.no_evidence_unanswerable`` off (the default) and on. Nothing is tuned: a plain evaluation of
the rule as it is, through the real pipeline with the lexical judge (no network).

- NQ301: every ground truth is a list of gold answers, so every question is answerable; a question the
  rule calls unanswerable is a refusal-detector false positive on a gold answer.
- DelucionQA: real answers of a car-manual chatbot, labeled refusal (it said its context lacks the
  answer) or not; the files carry no contexts and no ground truth. With the setting on, every question is
  unanswerable (no evidence), so every answer the chatbot gave counts as answered-unanswerable: the
  share of labeled non-refusals is how wrong that is where an app does not send what it retrieved.
- HaluEval QA: the knowledge passage holds the answer of every question: evidence there, no ground
  truth, so the rule leaves answerability unknown (it never reads answerability off the verdicts).

    .venv/bin/python benchmarks/answerability.py [--data ../shared/data] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.dataset import read_dataset
from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from pipeline.metrics.wilson import wilson_interval
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.settings import Settings

SETS = ("correctness_nq301", "refusal_delucionqa", "grounding_halueval_qa")


async def evaluate(interactions: list[Interaction], no_evidence_unanswerable: bool) -> list[Evaluation]:
    settings = Settings().with_changes(pipeline={"no_evidence_unanswerable": no_evidence_unanswerable})
    evaluator = Evaluator(LexicalJudge(), settings)
    try:
        out: list[Evaluation] = []
        for start in range(0, len(interactions), 32):
            batch = interactions[start : start + 32]
            out += await asyncio.gather(*(evaluator.evaluate(i) for i in batch))
        return out
    finally:
        await evaluator.aclose()


def share(k: int, n: int) -> str:
    if not n:
        return "undefined (n=0)"
    interval = wilson_interval(k, n)
    low, high = interval if interval else (0.0, 0.0)
    return f"{k}/{n} = {k / n:.3f} [95% Wilson {low:.3f}, {high:.3f}]"


def summary(name: str, evaluations: list[Evaluation], interactions: list[Interaction]) -> dict[str, object]:
    sources = Counter(f"{e.answerable_source}:{e.answerable}" for e in evaluations)
    out: dict[str, object] = {
        "cases": len(evaluations),
        "answerable by source": dict(sorted(sources.items())),
    }
    for flag in ("over_refusal", "answered_unanswerable"):
        known = [getattr(e, flag) for e in evaluations if getattr(e, flag) is not None]
        out[f"{flag} rate the stream reports"] = share(sum(known), len(known))
    if name == "correctness_nq301":
        out["called unanswerable (all are answerable)"] = share(
            sum(e.answerable is False for e in evaluations), len(evaluations)
        )
    if name == "refusal_delucionqa":
        labels = [(i.labels or {}).get("answer_refusal") for i in interactions]
        decided = [(e, label) for e, label in zip(evaluations, labels, strict=True) if e.answerable is False]
        out["unanswerable, labeled answered (answered-unanswerable counted)"] = share(
            sum(label == 0 for _, label in decided), len(decided)
        )
        out["unanswerable, labeled refusal (agrees with the chatbot)"] = share(
            sum(label == 1 for _, label in decided), len(decided)
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--limit", type=int, default=None, help="first N lines of each file")
    args = parser.parse_args(argv)
    for name in SETS:
        path = args.data / f"{name}.jsonl"
        if not path.exists():
            print(f"{name}: missing ({path})")
            continue
        interactions = [line.interaction for line in read_dataset(path, limit=args.limit).lines]
        for setting in (False, True):
            evaluations = asyncio.run(evaluate(interactions, setting))
            print(name, f"no_evidence_unanswerable={str(setting).lower()}")
            print(json.dumps(summary(name, evaluations, interactions), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
