"""Precision and recall of the lexical re-ask and self-contradiction rules on planted cases:

    python -m benchmarks.conversation_detection [--folds 5] [--seed 34]

The cases are built from the bundled sample (groundwatch/data/sample_interactions.jsonl, 300 real
questions and answers of three apps), so they are planted, not observed:

- re-ask, positive: a question and a rewrite of it (filler words, a reordered or shortened form, a
  politeness prefix, a synonym swap; see ``rewrite``); negative: the question and the other question of
  the same app with the most content words in common (the hardest), and one other question of the app
  at random. ``conversations.reask_similarity`` is chosen by
  grouped cross-validation (groups: the source question; the threshold maximising F1 on the training
  folds) and precision and recall are reported out of fold, mean and standard deviation over the folds.
  The rewrites are lexical, so recall on people's real re-asks (which may share fewer words) is lower
  than this figure says; the precision on distinct questions of one app is the sample's own.
- contradiction, positive: an answer with a number or a name past its first word, and the same answer
  with one such value changed (a number moved, a name swapped for a name of another answer); negative:
  the same answer again, the answer with a sentence added, or another answer of the same app. The rule's
  constant (``pipeline.conversations.SAME_SUBJECT``) is not tuned here: the figures are at the shipped
  value, over every case (in-sample in no sense: nothing is chosen on them).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.conversations import claims, content_words, contradicts, jaccard
from schemas.settings import ConversationSettings

SAMPLE = Path(__file__).resolve().parents[1] / "groundwatch" / "data" / "sample_interactions.jsonl"
PREFIXES = ("Sorry, again: ", "I asked before, ", "Please tell me: ", "One more time, ", "")
FILLERS = (" exactly", " actually", " please", " again")
SYNONYMS = {
    "how many": "what number of",
    "what is": "what's",
    "who was": "who is",
    "when did": "at what time did",
}


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def rewrite(question: str, rng: random.Random) -> str:
    """A re-ask of ``question``: a prefix, a synonym swap, a filler word, sometimes its last clause only."""
    q = question.strip().rstrip("?")
    lower = q.lower()
    for a, b in SYNONYMS.items():
        if lower.startswith(a) and rng.random() < 0.7:
            q = b + q[len(a) :]
            break
    words = q.split()
    if len(words) > 8 and rng.random() < 0.3:
        words = words[len(words) // 4 :]  # the gist, without its opening
    if rng.random() < 0.5:
        words.insert(rng.randrange(1, len(words) + 1), rng.choice(FILLERS).strip())
    return rng.choice(PREFIXES) + " ".join(words) + "?"


@dataclass(frozen=True)
class Pair:
    group: int
    a: str
    b: str
    positive: bool


def reask_pairs(records: Sequence[dict[str, Any]], rng: random.Random) -> list[Pair]:
    by_app: dict[str, list[str]] = {}
    for r in records:
        by_app.setdefault(r["app"], []).append(r["question"])
    pairs = []
    for i, r in enumerate(records):
        pairs.append(Pair(i, r["question"], rewrite(r["question"], rng), True))
        others = [q for q in by_app[r["app"]] if q != r["question"]]
        mine = content_words(r["question"])
        nearest = max(others, key=lambda q: (jaccard(mine, content_words(q)), q))
        pairs.append(Pair(i, r["question"], nearest, False))  # the hardest: most words in common
        pairs.append(Pair(i, r["question"], rng.choice(others), False))
    return pairs


_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_NAME = re.compile(r"(?<=\s)[A-Z][a-z]+\b")


def change_value(answer: str, names: Sequence[str], rng: random.Random) -> str | None:
    numbers = list(_NUMBER.finditer(answer))
    if numbers:
        m = rng.choice(numbers)
        value = m.group(0).replace(",", "")
        new = str(int(float(value)) + rng.choice((1, 2, 3, 7, 10)))
        return answer[: m.start()] + new + answer[m.end() :]
    found = [m for m in _NAME.finditer(answer)]
    if found:
        m = rng.choice(found)
        replacement = rng.choice([n for n in names if n != m.group(0)])
        return answer[: m.start()] + replacement + answer[m.end() :]
    return None


def contradiction_pairs(records: Sequence[dict[str, Any]], rng: random.Random) -> list[Pair]:
    names = sorted({m.group(0) for r in records for m in _NAME.finditer(r["answer"])})
    by_app: dict[str, list[str]] = {}
    for r in records:
        by_app.setdefault(r["app"], []).append(r["answer"])
    pairs = []
    for i, r in enumerate(records):
        answer = r["answer"]
        if not claims(answer):
            continue  # no number or name to change: the rule cannot see it (counted apart)
        changed = change_value(answer, names, rng)
        if changed is not None and changed != answer:
            pairs.append(Pair(i, answer, changed, True))
        pairs.append(Pair(i, answer, answer, False))
        pairs.append(Pair(i, answer, answer + " I hope this helps.", False))
        others = [a for a in by_app[r["app"]] if a != answer]
        pairs.append(Pair(i, answer, rng.choice(others), False))
    return pairs


def precision_recall(predicted: Sequence[bool], truth: Sequence[bool]) -> tuple[float, float, float]:
    tp = sum(p and t for p, t in zip(predicted, truth, strict=True))
    fp = sum(p and not t for p, t in zip(predicted, truth, strict=True))
    fn = sum(t and not p for p, t in zip(predicted, truth, strict=True))
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return precision, recall, f1


def reask_cv(pairs: Sequence[Pair], folds: int, seed: int) -> dict[str, Any]:
    sims = [jaccard(content_words(p.a), content_words(p.b)) for p in pairs]
    groups = sorted({p.group for p in pairs})
    random.Random(seed).shuffle(groups)
    fold_of = {g: i % folds for i, g in enumerate(groups)}
    grid = [round(0.05 * k, 2) for k in range(2, 20)]
    out: list[tuple[float, float, float, float]] = []
    for f in range(folds):
        train = [(s, p.positive) for s, p in zip(sims, pairs, strict=True) if fold_of[p.group] != f]
        test = [(s, p.positive) for s, p in zip(sims, pairs, strict=True) if fold_of[p.group] == f]
        best = max(grid, key=lambda t: precision_recall([s >= t for s, _ in train], [y for _, y in train])[2])
        pr = precision_recall([s >= best for s, _ in test], [y for _, y in test])
        out.append((best, *pr))
    shipped = ConversationSettings().reask_similarity
    at_default = precision_recall([s >= shipped for s in sims], [p.positive for p in pairs])
    return {
        "pairs": len(pairs),
        "positives": sum(p.positive for p in pairs),
        "default_threshold": shipped,
        "at_default_all_pairs": at_default,
        "thresholds": [o[0] for o in out],
        "precision": (statistics.mean(o[1] for o in out), statistics.stdev(o[1] for o in out)),
        "recall": (statistics.mean(o[2] for o in out), statistics.stdev(o[2] for o in out)),
        "f1": (statistics.mean(o[3] for o in out), statistics.stdev(o[3] for o in out)),
    }


def contradiction_figures(pairs: Sequence[Pair], records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    predicted = [contradicts(claims(p.b), claims(p.a)) for p in pairs]
    precision, recall, f1 = precision_recall(predicted, [p.positive for p in pairs])
    by_kind = {
        "changed value (positive)": [pr for pr, p in zip(predicted, pairs, strict=True) if p.positive],
        "same answer": [pr for pr, p in zip(predicted, pairs, strict=True) if not p.positive and p.a == p.b],
        "sentence added": [
            pr
            for pr, p in zip(predicted, pairs, strict=True)
            if not p.positive and p.b.startswith(p.a) and p.a != p.b
        ],
        "other answer, same app": [
            pr for pr, p in zip(predicted, pairs, strict=True) if not p.positive and not p.b.startswith(p.a)
        ],
    }
    return {
        "answers_with_a_value": len({p.group for p in pairs}),
        "answers": len(records),
        "pairs": len(pairs),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "flagged_share_by_kind": {k: (sum(v) / len(v) if v else None, len(v)) for k, v in by_kind.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    records = load()
    rng = random.Random(args.seed)
    reask = reask_cv(reask_pairs(records, rng), args.folds, args.seed)
    contra = contradiction_figures(contradiction_pairs(records, rng), records)
    print(json.dumps({"reask": reask, "contradiction": contra}, indent=2))


if __name__ == "__main__":
    main()
