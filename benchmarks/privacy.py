"""Personal data masking (pipeline.privacy), measured: detection, cost, effect on accuracy.

1. Detection: the bundled interactions (groundwatch/data/sample_interactions.jsonl) with generated
   personal data of every supported kind and several formats inserted at known places (each value
   unique, so its offset is where it is found), seeded. Per kind: recall (planted values overlapped by
   a finding of that kind), precision (findings of that kind that overlap a planted value of that kind;
   a finding in the original text counts against it). Names and locations are not generated: without a
   spaCy model nothing finds them (``privacy.spacy_model``).
2. Cost: milliseconds to mask one interaction (``Masker.mask``: every text of it), p50 and p99, on the
   planted corpus and on the original one; then the fused pipeline in process (``Evaluator``, lexical
   judge, 32 in flight, as the fused processor runs it: ``for_storage``, sampling, ``for_judge``) in
   interactions a second with ``privacy.mode`` all against off, alternated in one run.
3. Accuracy: balanced accuracy of the lexical judge on the labeled dev sets (../shared/data) with mode
   all against off (``groundwatch eval``'s code path).

``python benchmarks/privacy.py [--seed 0] [--per-interaction 3] [--passes 3] [--limit N] [--json OUT]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import string
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, write_json  # noqa: E402
from pipeline.dataset import read_dataset  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.lexical import LexicalJudge  # noqa: E402
from pipeline.privacy.detect import PresidioDetector  # noqa: E402
from pipeline.privacy.mask import LABELS, Masker, PrivacyGuard, choose, map_interaction, texts_of  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import PrivacySettings, Settings  # noqa: E402

SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
DEV = REPO.parent / "shared" / "data"
DEV_SETS = ("grounding_halueval_qa", "grounding_faithbench", "correctness_nq301", "refusal_delucionqa")


# ---- generated personal data ----------------------------------------------------------------------
def luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def card(rng: random.Random) -> str:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15)])
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    number = body + luhn_digit(body)
    style = rng.choice(["plain", "space", "dash"])
    if style == "plain":
        return number
    groups = [4, 6, 5] if length == 15 else [4, 4, 4, 4]
    parts, at = [], 0
    for g in groups:
        parts.append(number[at : at + g])
        at += g
    return (" " if style == "space" else "-").join(parts)


def iban(rng: random.Random) -> str:
    country, bban_len = rng.choice([("DE", 18), ("GB", 18), ("FR", 23), ("NL", 14), ("ES", 20)])
    if country in ("GB", "NL"):
        bank = "".join(rng.choice(string.ascii_uppercase) for _ in range(4))
        bban = bank + "".join(rng.choice(string.digits) for _ in range(bban_len - 4))
    else:
        bban = "".join(rng.choice(string.digits) for _ in range(bban_len))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    value = f"{country}{check:02d}{bban}"
    if rng.random() < 0.5:
        return " ".join(value[i : i + 4] for i in range(0, len(value), 4))
    return value


def email(rng: random.Random) -> str:
    first = rng.choice(["anna", "li", "omar", "jo", "mira", "sven", "keiko", "pat", "ravi", "eve"])
    last = rng.choice(["kowalski", "smith", "nguyen", "garcia", "okafor", "berg", "tanaka", "rossi"])
    sep = rng.choice([".", "_", "", "-"])
    domain = rng.choice(["gmail.com", "outlook.com", "corp-mail.de", "uni.ac.uk", "example.org", "shop.io"])
    return f"{first}{sep}{last}{rng.randint(1, 999)}@{domain}"


def phone(rng: random.Random) -> str:
    # area codes in service (generated numbers in unassigned ones are rightly not phone numbers)
    area = rng.choice([212, 213, 206, 305, 312, 404, 415, 503, 512, 602, 617, 646, 702, 713, 718, 801, 919])
    mid, end = rng.randint(200, 989), rng.randint(1000, 9999)
    return rng.choice(
        [
            f"({area}) {mid}-{end}",
            f"{area}-{mid}-{end}",
            f"+1 {area} {mid} {end}",
            f"+1-{area}-{mid}-{end}",
            f"+44 20 {rng.randint(7000, 8999)} {rng.randint(1000, 9999)}",
            f"+49 30 {rng.randint(1000000, 9999999)}",
            f"+91 {rng.randint(90000, 99999)} {rng.randint(10000, 99999)}",
        ]
    )


def ip(rng: random.Random) -> str:
    if rng.random() < 0.8:
        return ".".join(str(rng.randint(1, 254)) for _ in range(4))
    return ":".join(f"{rng.randint(0, 0xFFFF):x}" for _ in range(8))


def ssn(rng: random.Random) -> str:
    area = rng.choice([n for n in range(1, 900) if n != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def url(rng: random.Random) -> str:
    host = rng.choice(["portal", "www", "app", "help", "my"])
    site = rng.choice(["northwind", "acme-bank", "travelco", "clinic24", "shopnow"])
    tld = rng.choice(["com", "org", "net", "de", "co.uk"])
    path = "/".join(rng.choice(["account", "orders", "id", "x", "profile"]) for _ in range(rng.randint(0, 2)))
    scheme = rng.choice(["https://", "http://", ""])
    return f"{scheme}{host}.{site}.{tld}/{path}{rng.randint(1, 99999)}"


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "EMAIL": email, "PHONE": phone, "CARD": card, "IBAN": iban, "IP": ip, "SSN": ssn, "URL": url,
}  # fmt: skip
CARRIERS = {
    "EMAIL": ["write to {}", "my email is {}", "({})"],
    "PHONE": ["call {}", "my number is {}", "tel. {}"],
    "CARD": ["card {}", "paid with {}", "card number {}"],
    "IBAN": ["IBAN {}", "to account {}", "{}"],
    "IP": ["from {}", "address {}", "host {}"],
    "SSN": ["SSN {}", "social security number {}", "{}"],
    "URL": ["see {}", "at {}", "link: {}"],
}


def plant(
    interaction: Interaction, rng: random.Random, count: int
) -> tuple[Interaction, list[tuple[int, str, str]]]:
    """The interaction with ``count`` generated values inserted at word boundaries of random texts;
    each planted value as (text index in ``texts_of`` order, kind, value)."""
    texts = texts_of(interaction)
    eligible = [i for i, t in enumerate(texts) if t.strip()]
    planted: list[tuple[int, str, str]] = []
    new = list(texts)
    for _ in range(count):
        index = rng.choice(eligible)
        kind = rng.choice(sorted(GENERATORS))
        value = GENERATORS[kind](rng)
        phrase = rng.choice(CARRIERS[kind]).format(value)
        text = new[index]
        inside = [(text.find(v), text.find(v) + len(v)) for i, _, v in planted if i == index]
        spaces = [
            p
            for p, ch in enumerate(text)
            if ch == " "
            and not any(a <= p < b for a, b in inside)
            and not text[p - 1 : p].isdigit()  # in prose, not glued to a number: "4.0)", "1881 and"
            and not text[p + 1 : p + 2].isdigit()
        ]
        at = rng.choice(spaces or [len(text)])  # never inside a value planted before
        new[index] = f"{text[:at]} {phrase}{text[at:]}"
        planted.append((index, kind, value))
    it = iter(new)
    return map_interaction(interaction, lambda _: next(it)), planted


# ---- 1. detection ---------------------------------------------------------------------------------
def detection(detector: PresidioDetector, corpus: list[Interaction], seed: int, per: int) -> dict[str, Any]:
    rng = random.Random(seed)
    planted_by_kind: dict[str, int] = defaultdict(int)
    hits: dict[str, int] = defaultdict(int)
    true_findings: dict[str, int] = defaultdict(int)
    findings: dict[str, int] = defaultdict(int)
    natural: dict[str, int] = defaultdict(int)
    for interaction in corpus:
        for text in texts_of(interaction):  # findings in the original texts: all false
            for span in choose(detector.detect(text)):
                natural[LABELS.get(span.entity, span.entity)] += 1
        planted_interaction, planted = plant(interaction, rng, per)
        texts = texts_of(planted_interaction)
        spans_by_text = [choose(detector.detect(t)) for t in texts]
        where: list[tuple[int, str, int, int]] = []
        for index, kind, value in planted:
            start = texts[index].find(value)
            assert start >= 0, (kind, value)
            where.append((index, kind, start, start + len(value)))
            planted_by_kind[kind] += 1
        for index, kind, start, end in where:
            if any(
                LABELS.get(s.entity, s.entity) == kind and s.start < end and start < s.end
                for s in spans_by_text[index]
            ):
                hits[kind] += 1
        for index, spans in enumerate(spans_by_text):
            for s in spans:
                kind = LABELS.get(s.entity, s.entity)
                findings[kind] += 1
                if any(k == kind and i == index and s.start < e and b < s.end for i, k, b, e in where):
                    true_findings[kind] += 1
    kinds = sorted(set(planted_by_kind) | set(findings))
    return {
        kind: {
            "planted": planted_by_kind[kind],
            "recall": hits[kind] / planted_by_kind[kind] if planted_by_kind[kind] else None,
            "findings": findings[kind],
            "precision": true_findings[kind] / findings[kind] if findings[kind] else None,
            "in_original_texts": natural[kind],
        }
        for kind in kinds
    }


# ---- 2. cost --------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def mask_cost(masker: Masker, corpus: list[Interaction], passes: int) -> dict[str, float]:
    times = []
    for _ in range(passes):
        for interaction in corpus:
            started = time.perf_counter()
            masker.mask(interaction)
            times.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": percentile(times, 0.5),
        "p99_ms": percentile(times, 0.99),
        "mean_ms": statistics.fmean(times),
    }


async def pipeline_rate(corpus: list[Interaction], guard: PrivacyGuard, settings: Settings) -> float:
    evaluator = Evaluator(LexicalJudge(), settings)
    semaphore = asyncio.Semaphore(32)

    async def one(interaction: Interaction) -> None:
        async with semaphore:
            stored = guard.for_storage(interaction)
            judged = guard.for_judge(stored)
            await evaluator.evaluate(judged.interaction, judged.originals)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in corpus))
    wall = time.perf_counter() - started
    await evaluator.aclose()
    return len(corpus) / wall


def throughput(corpus: list[Interaction], masker: Masker, rounds: int) -> dict[str, Any]:
    settings = Settings.from_values({"judge": {"kind": "lexical"}})
    guards = {
        "off": PrivacyGuard(PrivacySettings(mode="off")),
        "all": PrivacyGuard(PrivacySettings(mode="all"), masker),
    }
    rates: dict[str, list[float]] = {"off": [], "all": []}
    asyncio.run(pipeline_rate(corpus, guards["off"], settings))  # warm-up
    for _ in range(rounds):
        for mode in ("off", "all"):
            rates[mode].append(asyncio.run(pipeline_rate(corpus, guards[mode], settings)))
    off, on = statistics.median(rates["off"]), statistics.median(rates["all"])
    return {"off_per_s": off, "all_per_s": on, "slower_share": 1 - on / off, "rounds": rounds}


# ---- 3. accuracy ----------------------------------------------------------------------------------
def accuracy(limit: int | None) -> dict[str, Any]:
    from groundwatch.commands.eval_cmd import run_eval

    out: dict[str, Any] = {}
    for name in DEV_SETS:
        path = DEV / f"{name}.jsonl"
        if not path.exists():
            continue
        row: dict[str, Any] = {}
        for mode in ("off", "all"):
            settings = Settings.from_values({"judge": {"kind": "lexical"}, "privacy": {"mode": mode}})
            with tempfile.TemporaryDirectory() as work:
                args = argparse.Namespace(
                    input=path, out=Path(work) / "r.json", evaluations=None, judge="lexical", relevance=False,
                    concurrency=None, limit=limit, quiet=True, bootstrap=0, sampling=None,
                )  # fmt: skip
                report = asyncio.run(run_eval(args, settings))
            labels = report.labels
            row[mode] = {label: r.primary.balanced_accuracy for label, r in labels.items()}
            row["n"] = report.evaluated
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-interaction", type=int, default=3, help="values planted per interaction")
    parser.add_argument("--copies", type=int, default=4, help="planted copies of the corpus (each reseeded)")
    parser.add_argument("--passes", type=int, default=3, help="timing passes over the corpus")
    parser.add_argument("--rounds", type=int, default=3, help="alternated off/all rounds of the pipeline")
    parser.add_argument("--limit", type=int, default=None, help="lines of each dev set (default all)")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    corpus = [line.interaction for line in read_dataset(SAMPLE, Settings().limits).lines]
    started = time.perf_counter()
    detector = PresidioDetector(PrivacySettings())
    load_s = time.perf_counter() - started
    masker = Masker(detector)
    figures: dict[str, Any] = {"detector_load_s": load_s, "interactions": len(corpus)}

    merged: dict[str, dict[str, Any]] = {}
    for copy in range(args.copies):
        part = detection(detector, corpus, args.seed + copy, args.per_interaction)
        for kind, f in part.items():
            m = merged.setdefault(
                kind, {"planted": 0, "hits": 0.0, "findings": 0, "true": 0.0, "in_original_texts": 0}
            )
            m["planted"] += f["planted"]
            m["hits"] += (f["recall"] or 0) * f["planted"]
            m["findings"] += f["findings"]
            m["true"] += (f["precision"] or 0) * f["findings"]
            m["in_original_texts"] = f["in_original_texts"]
    figures["detection"] = {
        kind: {
            "planted": m["planted"],
            "recall": m["hits"] / m["planted"] if m["planted"] else None,
            "findings": m["findings"],
            "precision": m["true"] / m["findings"] if m["findings"] else None,
            "in_original_texts": m["in_original_texts"],
        }
        for kind, m in sorted(merged.items())
    }
    rng = random.Random(args.seed)
    planted_corpus = [plant(i, rng, args.per_interaction)[0] for i in corpus]
    figures["mask_ms_planted"] = mask_cost(masker, planted_corpus, args.passes)
    figures["mask_ms_original"] = mask_cost(masker, corpus, args.passes)
    figures["pipeline"] = throughput(corpus * 3, masker, args.rounds)
    if not args.skip_accuracy:
        figures["accuracy"] = accuracy(args.limit)
    machine.finish()

    print(f"\ndetector loaded in {load_s:.2f} s; {len(corpus)} interactions x {args.copies} copies, "
          f"{args.per_interaction} values planted in each")  # fmt: skip
    print("\n| kind | planted | recall | findings | precision | findings in the original texts |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, f in figures["detection"].items():
        recall = "-" if f["recall"] is None else f"{f['recall']:.3f}"
        precision = "-" if f["precision"] is None else f"{f['precision']:.3f}"
        cells = [kind, f["planted"], recall, f["findings"], precision, f["in_original_texts"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    for name in ("mask_ms_planted", "mask_ms_original"):
        c = figures[name]
        print(f"\n{name}: p50 {c['p50_ms']:.2f} ms, p99 {c['p99_ms']:.2f} ms, mean {c['mean_ms']:.2f} ms")
    p = figures["pipeline"]
    print(
        f"\nfused pipeline in process (lexical judge): off {p['off_per_s']:.1f}/s, "
        f"all {p['all_per_s']:.1f}/s ({p['slower_share']:+.1%} slower), median of {p['rounds']} rounds"
    )
    if "accuracy" in figures:
        print("\n| dev set | n | label | balanced accuracy off | all | difference |")
        print("|---|---:|---|---:|---:|---:|")
        for name, row in figures["accuracy"].items():
            for label, off in row["off"].items():
                on = row["all"].get(label)
                diff = "-" if off is None or on is None else f"{on - off:+.4f}"
                off_s = "-" if off is None else f"{off:.4f}"
                on_s = "-" if on is None else f"{on:.4f}"
                print(f"| {name} | {row['n']} | {label} | {off_s} | {on_s} | {diff} |")
    print("\n" + machine.describe())
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
