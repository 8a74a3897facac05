"""Citation checks: how well "miscited" and "the cited passage supports the statement" are detected.

    python benchmarks/citation_accuracy.py [--data ../shared/data] [--questions 490] [--judge lexical]
        [--json out.json]

A labeled set built from HaluEval QA (``grounding_halueval_qa.jsonl``: per question its knowledge passage,
a right answer and a hallucinated one). Each question gets three numbered passages: its own and two other
questions' (chosen with a fixed seed), in a shuffled order, each with a document name. Four answers:

- ``right``: the right answer citing its own passage (not miscited; the citation supports);
- ``wrong``: the right answer citing another question's passage (miscited; does not support);
- ``hallucinated``: the hallucinated answer citing the question's own passage (miscited; does not support);
- ``uncited``: the first sentence of the question's passage citing it, then "The answer is <right answer>."
  without a citation (half of its statements uncited).

The citation is written ``[n]``, ``【n†source】`` or ``[^n]`` in turn, so the measured figures include the
marker reader. Every interaction goes through the Evaluator (markers read and removed, the judge's NLI
pass names the supporting passages, ``pipeline.metrics.citations`` decides) with the lexical judge, or
``--judge local`` / ``cascade`` / ``openai`` (the judge settings from ``GROUNDWATCH_JUDGE__*``).

Figures: precision and recall of ``miscited`` over the right/wrong/hallucinated answers, and of "supports"
over their (statement, cited passage) pairs (``StatementCitations.precise``), per fold of a grouped 5-fold
split by question (its passage and its answers stay in one fold), as mean and sd over the folds, and pooled.
No threshold is fitted (the decision is the judge's own entailment at its settings): the folds give the
spread. Also the share of ``uncited`` answers whose statements all count as uncited.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import write_json  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.factory import open_judge  # noqa: E402
from pipeline.metrics.crossval import grouped_folds, mean_sd  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import Settings  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data"
SET = "grounding_halueval_qa.jsonl"
KINDS = ("right", "wrong", "hallucinated", "uncited")
STYLES = ("[{n}]", "【{n}†source】", "[^{n}]")


def load_questions(data: Path, limit: int) -> list[dict[str, Any]]:
    """Per question: its passage, right answer and hallucinated answer (records come in pairs)."""
    by_question: dict[str, dict[str, Any]] = {}
    for line in (data / SET).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        entry = by_question.setdefault(record["question"], {"question": record["question"]})
        entry["passage"] = record["contexts"][0]
        entry["right" if record["labels"]["grounded"] == 1 else "hallucinated"] = record["answer"]
    questions = [q for q in by_question.values() if "right" in q and "hallucinated" in q]
    return questions[:limit]


def build_cases(questions: list[dict[str, Any]], seed: int = 0) -> list[tuple[Interaction, str, int, int]]:
    """(interaction, kind, question index, the 1-based number of the question's own passage)."""
    rng = random.Random(seed)
    out: list[tuple[Interaction, str, int, int]] = []
    for qi, q in enumerate(questions):
        others = rng.sample([i for i in range(len(questions)) if i != qi], 2)
        order = [qi, *others]
        rng.shuffle(order)
        contexts = [{"text": questions[i]["passage"], "document": f"doc-{i}"} for i in order]
        own = order.index(qi) + 1
        wrong = order.index(others[0]) + 1
        style = STYLES[qi % len(STYLES)]
        answers = {
            "right": f"{q['right'].rstrip('.')} {style.format(n=own)}.",
            "wrong": f"{q['right'].rstrip('.')} {style.format(n=wrong)}.",
            "hallucinated": f"{q['hallucinated'].rstrip('.')} {style.format(n=own)}.",
            "uncited": f"{q['passage'].split('. ')[0].rstrip('.')} {style.format(n=own)}. "
            f"The answer is {q['right'].rstrip('.')}.",
        }
        for kind in KINDS:
            interaction = Interaction.model_validate(
                {"id": f"q{qi}-{kind}", "question": q["question"], "contexts": contexts,
                 "answer": answers[kind]}
            )  # fmt: skip
            out.append((interaction, kind, qi, own))
    return out


def precision_recall(pairs: list[tuple[int, int]]) -> tuple[float | None, float | None]:
    """(precision, recall) of the predictions (label, predicted) for the positive class."""
    tp = sum(1 for y, p in pairs if y and p)
    predicted = sum(1 for _, p in pairs if p)
    positives = sum(1 for y, _ in pairs if y)
    return (tp / predicted if predicted else None), (tp / positives if positives else None)


def figures(per_fold: dict[int, list[tuple[int, int]]]) -> dict[str, Any]:
    folds = [precision_recall(per_fold[f]) for f in sorted(per_fold)]
    pooled = precision_recall([pair for f in per_fold for pair in per_fold[f]])
    p_mean, p_sd = mean_sd([p for p, _ in folds])
    r_mean, r_sd = mean_sd([r for _, r in folds])
    n = sum(len(v) for v in per_fold.values())
    return {"n": n, "precision": [p_mean, p_sd], "recall": [r_mean, r_sd], "pooled": list(pooled)}


async def evaluate_all(interactions: list[Interaction], kind: str, concurrency: int) -> list[Evaluation]:
    settings = Settings().with_changes(judge={"kind": kind})
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        slots = asyncio.Semaphore(concurrency)

        async def one(interaction: Interaction) -> Evaluation:
            async with slots:
                return await evaluator.evaluate(interaction)

        try:
            return list(await asyncio.gather(*(one(i) for i in interactions)))
        finally:
            await evaluator.aclose()


async def run(data: Path, limit: int, kind: str = "lexical", concurrency: int = 32) -> dict[str, Any]:
    questions = load_questions(data, limit)
    cases = build_cases(questions)
    evaluations = await evaluate_all([i for i, *_ in cases], kind, concurrency)
    folds = grouped_folds([qi for _, _, qi, _ in cases])
    miscited: dict[int, list[tuple[int, int]]] = defaultdict(list)
    supports: dict[int, list[tuple[int, int]]] = defaultdict(list)
    by_kind: dict[str, list[int]] = defaultdict(list)
    right_uncited: list[int] = []  # per right answer (every sentence cited): a statement counted uncited
    uncited: list[int] = []  # per uncited answer: a statement counted uncited
    for (_, kind, _, _), fold, e in zip(cases, folds, evaluations, strict=True):
        if kind == "uncited":
            uncited.append(int(bool(e.uncited_statements)))
            continue
        if kind == "right":
            right_uncited.append(int(bool(e.uncited_statements)))
        label = int(kind != "right")
        predicted = int(bool(e.miscited))
        miscited[fold].append((label, predicted))
        by_kind[kind].append(predicted)
        statements = [s for p in e.pairs[:1] for h in p.hypotheses for s in h.statements]
        for s in statements:
            if s.citations is None:
                continue
            for precise in s.citations.precise:
                supports[fold].append((int(kind == "right"), int(precise)))
    return {
        "questions": len(questions),
        "interactions": len(cases),
        "judge": kind,
        "miscited": figures(miscited),
        "supports": figures(supports),
        "flagged_miscited_by_kind": {k: sum(v) / len(v) for k, v in by_kind.items()},
        "uncited_found_in_uncited_answers": sum(uncited) / len(uncited),
        "uncited_found_in_cited_answers": sum(right_uncited) / len(right_uncited),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--questions", type=int, default=490)
    ap.add_argument("--judge", default="lexical", choices=("lexical", "local", "cascade", "openai"))
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    result = asyncio.run(run(args.data, args.questions, args.judge, args.concurrency))
    print(json.dumps(result, indent=2))
    write_json(args.json, result)


if __name__ == "__main__":
    main()
