"""Topics (``pipeline.topic_discovery``) measured on the labeled dev files: the questions of four sets,
each question's source known.

- **Agreement with the sources**: purity (each topic counted as its most common source; 'other' left
  out, its share given) and the adjusted Rand index of the topics against the sources ('other' a group
  of its own), over seeds, for each grouping method (k-means at each ``--max-topics``).
- **A failure planted in one subject**: each subject in turn fails (a question of it fails with
  probability 0.5, any other with 0.05); found when the topic with the highest failure rate (of those
  with at least 10 questions) is mostly that subject ("found"), and when it is the topic that holds most
  of the subject's questions ("the subject's topic"). The subjects: each source (of at least 20
  questions), and the car-manual questions naming the engine, a light, a warning or the security
  system (15 to 30 questions each).
- **Stable ids**: a refit on a random 80 % of the questions (from the model of all of them): the share
  of questions whose topic id stays the same.
- **Cost**: CPU seconds per question to embed (batches of 64) and to assign, the worker's assignment
  (one question in flight, and 128), a fit of 10,000 questions
  (the dev questions drawn with replacement, with a little noise so no two are equal), and the process's
  peak memory.

    .venv/bin/python benchmarks/topics.py [--data ../shared/data] [--seeds 5] [--max-topics 20,40]
        [--out build/topics/topics.json]

Questions are taken once each per source (NQ301 and DelucionQA repeat a question across answers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.embeddings import TextEncoder, Vectors
from pipeline.topic_assignment import TopicAssigner
from pipeline.topic_discovery import assign, fit_topics
from schemas.settings import TopicsSettings
from schemas.topic_model import OTHER

SETS = ("correctness_nq301", "grounding_faithbench", "grounding_halueval_qa", "refusal_delucionqa")
FIXED_AT = datetime(2026, 11, 29, tzinfo=UTC)


def questions(data: Path) -> tuple[list[str], list[str]]:
    """(question, source) of each distinct question of each set."""
    texts: list[str] = []
    sources: list[str] = []
    for name in SETS:
        seen: set[str] = set()
        for line in (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = str(json.loads(line)["question"]).strip()
                if q and q not in seen:
                    seen.add(q)
                    texts.append(q)
                    sources.append(name)
    return texts, sources


def agreement(topics: list[str], sources: list[str]) -> dict[str, float]:
    from sklearn.metrics import adjusted_rand_score

    inside = [(t, s) for t, s in zip(topics, sources, strict=True) if t != OTHER]
    by_topic: dict[str, Counter[str]] = {}
    for t, s in inside:
        by_topic.setdefault(t, Counter())[s] += 1
    purity = sum(c.most_common(1)[0][1] for c in by_topic.values()) / max(len(inside), 1)
    return {
        "purity": purity,
        "ari": float(adjusted_rand_score(sources, topics)),
        "other_share": 1 - len(inside) / len(topics),
        "topics": float(len(by_topic)),
    }


#: subjects inside one source: the car-manual questions that name the word (each named by 15 to 30 of
#: its 474 distinct questions)
WORDS = ("engine", "light", "warning", "security")


def subjects(texts: list[str], sources: list[str]) -> dict[str, list[str]]:
    """Each question's subject under each planting: its source, or whether it names one of ``WORDS``."""
    out = {name: sources for name in SETS}
    for word in WORDS:
        out[f"word:{word}"] = [word if word in t.lower() else "rest" for t in texts]
    return out


def planted(
    topics: list[str], texts: list[str], sources: list[str], seed: int
) -> dict[str, tuple[bool, bool]]:
    """For each subject: is the topic with the highest planted failure rate mostly that subject, and is it
    the topic that holds most of the subject's questions?"""
    rng = np.random.default_rng(seed)
    found = {}
    for name, labels in subjects(texts, sources).items():
        subject = name.removeprefix("word:")
        if labels.count(subject) < 15:
            continue
        fails = [rng.random() < (0.5 if s == subject else 0.05) for s in labels]
        rates: dict[str, list[bool]] = {}
        for t, f in zip(topics, fails, strict=True):
            if t != OTHER:
                rates.setdefault(t, []).append(f)
        big = {t: sum(v) / len(v) for t, v in rates.items() if len(v) >= 10}
        worst = max(big, key=lambda t: big[t]) if big else None
        members = Counter(s for t, s in zip(topics, labels, strict=True) if t == worst)
        home = Counter(t for t, s in zip(topics, labels, strict=True) if s == subject and t != OTHER)
        found[name] = (
            bool(members) and members[subject] > sum(members.values()) / 2,
            bool(home) and worst == home.most_common(1)[0][0],
        )
    return found


def spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": float(np.mean(values)),
        "sd": float(np.std(values)),
        "min": min(values),
        "max": max(values),
    }


def run_method(
    method: str, max_topics: int, texts: list[str], sources: list[str], vectors: Vectors, seeds: int
) -> dict[str, Any]:
    rows = []
    hits = homes = tries = 0
    missed: list[str] = []
    fit_s = []
    for seed in range(seeds):
        settings = TopicsSettings(method=method, max_topics=max_topics, seed=seed)  # type: ignore[arg-type]
        started = time.process_time()
        model = fit_topics(texts, vectors, settings, FIXED_AT)
        fit_s.append(time.process_time() - started)
        topics = [a.topic for a in assign(model, vectors)]
        rows.append(agreement(topics, sources))
        found = planted(topics, texts, sources, seed)
        hits += sum(mostly for mostly, _ in found.values())
        homes += sum(home for _, home in found.values())
        tries += len(found)
        missed += [k for k, (mostly, _) in found.items() if not mostly]
    return {
        "method": method,
        **{k: spread([r[k] for r in rows]) for k in ("purity", "ari", "other_share", "topics")},
        "max_topics": max_topics,
        "planted_found": f"{hits} of {tries}",
        "planted_subjects_topic": f"{homes} of {tries}",
        "planted_missed": dict(Counter(missed)),
        "fit_cpu_s": spread(fit_s),
    }


def stability(texts: list[str], vectors: Vectors, seeds: int) -> dict[str, Any]:
    """A refit on a random 80 % of the questions (another seed), from the model of all of them: the
    share of all questions whose topic id is the same under both models."""
    first = fit_topics(texts, vectors, TopicsSettings(), FIXED_AT)
    before = [a.topic for a in assign(first, vectors)]
    same = []
    for seed in range(1, seeds + 1):
        rng = np.random.default_rng(seed)
        part = rng.permutation(len(texts))[: int(0.8 * len(texts))]
        chosen = [texts[i] for i in part]
        refit = fit_topics(chosen, vectors[part], TopicsSettings(seed=seed), FIXED_AT, first)
        after = [a.topic for a in assign(refit, vectors)]
        same.append(sum(a == b for a, b in zip(before, after, strict=True)) / len(texts))
    return {"same_topic_after_refit": spread(same)}


async def _concurrent(assigner: TopicAssigner, questions: list[str], at_once: int) -> None:
    for i in range(0, len(questions), at_once):
        await asyncio.gather(*(assigner.topic_of(q) for q in questions[i : i + at_once]))


def worker_costs(encoder: TextEncoder, texts: list[str], vectors: Vectors) -> dict[str, float]:
    """CPU a question of the worker's assignment (``TopicAssigner``): one question at a time, and 128 in
    flight at once (the worker's default stage concurrency), which the assigner embeds in batches."""
    model = fit_topics(texts, vectors, TopicsSettings(), FIXED_AT)
    sample = texts[:320]
    out = {}
    for at_once in (1, 128):
        assigner = TopicAssigner(model, encoder)
        started = time.process_time()
        asyncio.run(_concurrent(assigner, sample, at_once))
        out[f"worker_cpu_ms_per_question_{at_once}_in_flight"] = (
            (time.process_time() - started) / len(sample) * 1000
        )
    return out


def costs(encoder: TextEncoder, texts: list[str], vectors: Vectors) -> dict[str, float]:
    sample = texts[:640]
    started = time.process_time()
    encoder.encode(sample)
    embed_s = (time.process_time() - started) / len(sample)
    rng = np.random.default_rng(0)
    many = vectors[rng.integers(0, len(vectors), 10_000)] + rng.normal(0, 0.01, (10_000, vectors.shape[1]))
    many = (many / np.linalg.norm(many, axis=1, keepdims=True)).astype(np.float32)
    many_texts = [texts[i % len(texts)] for i in range(10_000)]
    started = time.process_time()
    model = fit_topics(many_texts, many, TopicsSettings(), FIXED_AT)
    fit_10k = time.process_time() - started
    started = time.process_time()
    assign(model, many)
    assign_s = (time.process_time() - started) / len(many)
    return {
        "embed_cpu_ms_per_question": embed_s * 1000,
        "assign_cpu_ms_per_question": assign_s * 1000,
        "fit_10000_cpu_s": fit_10k,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-topics", type=lambda t: [int(x) for x in t.split(",")], default=[20, 40])
    ap.add_argument("--out", type=Path, default=Path("build/topics/topics.json"))
    args = ap.parse_args()
    texts, sources = questions(args.data)
    encoder = TextEncoder()
    started = time.perf_counter()
    vectors = encoder.encode(texts)
    print(
        f"{len(texts)} questions ({dict(Counter(sources))}) embedded in {time.perf_counter() - started:.1f} s"
    )
    out: dict[str, Any] = {"questions": len(texts), "sources": dict(Counter(sources)), "methods": []}
    for method, max_topics in [*(("kmeans", k) for k in args.max_topics), ("hdbscan", max(args.max_topics))]:
        result = run_method(method, max_topics, texts, sources, vectors, args.seeds)
        out["methods"].append(result)
        print(json.dumps(result))
    out["stability"] = stability(texts, vectors, args.seeds)
    print(json.dumps(out["stability"]))
    out["costs"] = {**costs(encoder, texts, vectors), **worker_costs(encoder, texts, vectors)}
    print(json.dumps(out["costs"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
