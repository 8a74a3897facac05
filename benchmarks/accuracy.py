"""Accuracy of each judge on the labeled dev sets, beside published detectors and a length baseline.

    python benchmarks/accuracy.py [--data ../shared/data] [--judges lexical,cascade,local]
        [--limit N] [--limit-for local=100] [--work build/accuracy] [--table docs/accuracy_table.md]
        [--reuse] [--table-only]

For every ``*.jsonl`` set in ``--data`` (default ``../shared/data`` beside the repository; when the
directory is absent the command says so and exits 0) and every judge in ``--judges``, it runs
``groundwatch eval SET --judge J --limit N --out WORK/J/SET.json`` as a subprocess (environment:
this process's, plus the judge's defaults below) and times it. Then it reads each run's Evaluations
JSONL (written as they finish, so a stopped run counts with its partial n) and writes a markdown table
(``--table``) and the same as JSON beside it (``.json``): per set and judge, the label's primary
score (``pipeline.report.LABEL_SCORES``), ROC AUC, balanced accuracy at the operating threshold (the
settings' calibrated default for that judge), the best threshold and its balanced accuracy, n, wall
time, tokens; on the same cases each peer's balanced accuracy (the set's ``peers`` field) and, for
grounding sets, a length-only baseline (score = -len(answer): HaluEval's right answers are short
spans) with its AUC and its best-threshold balanced accuracy (an optimistic figure for the baseline).
A threshold curve (balanced accuracy at 0.05 steps) is written for every scored run, so the defaults
in ``schemas/settings/`` can be traced to it.

Every judge runs with the settings a user gets by default (so the figures are the ones a user will
see); ``GROUNDWATCH_*`` variables in this process's environment are passed on and change them.

``--sample balanced`` (with a limit N) evaluates the first N/2 lines of each label class instead of
the first N lines (written under ``WORK/JUDGE/samples/``, the classes interleaved so that a run
stopped early stays balanced); ``--timeout S`` stops a run after S seconds (its finished Evaluations
count, marked partial);
``--reuse`` keeps runs whose report exists; ``--table-only`` runs nothing and tabulates what is in
``--work`` (partial runs included, marked).

The figures of this table are in-sample where a threshold is tuned (the operating thresholds were
calibrated on these files, the best threshold is chosen on the same cases). ``--cv`` runs the grouped
k-fold cross-validation and rule ablation of the lexical judge instead (``benchmarks/accuracy_cv.py``:
every threshold and rule switch chosen on training folds, scored on the held-out fold; ``--k``,
``--seed``, ``--sets`` and ``--data`` are passed on, the report goes to ``WORK/cv.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from pipeline.dataset import DatasetLine, read_dataset
from pipeline.metrics.classification import balanced_accuracy, best_threshold, roc_auc
from pipeline.report import FLAG_SCORES, LABEL_SCORES, SCORES, label_reports
from schemas.evaluation import Evaluation
from schemas.settings import Settings

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data"
LLM_JUDGES = {"local", "cascade", "openai"}
CURVE = [round(0.05 * i, 2) for i in range(1, 21)]


@dataclass
class Row:
    set: str
    label: str
    judge: str
    score: str
    n: int
    lines: int  # lines the run was asked to evaluate (limit or the whole file)
    complete: bool
    errors: int
    roc_auc: float | None
    threshold: float
    balanced_accuracy: float | None
    best_threshold: float | None
    best_balanced_accuracy: float | None
    wall_seconds: float | None
    input_tokens: int
    output_tokens: int
    judge_calls: int
    peers: dict[str, float | None] = field(default_factory=dict)
    peer_cases: int = 0
    ours_on_peer_cases: float | None = None
    length_auc: float | None = None
    length_best_balanced_accuracy: float | None = None
    secondary: dict[str, dict[str, float | None]] = field(default_factory=dict)
    # the lexical judge on exactly these cases (when this is another judge and a lexical run exists)
    lexical_same_cases: dict[str, float | None] = field(default_factory=dict)
    curve: dict[str, float | None] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    command: str = ""


def set_label(path: Path) -> str | None:
    """The label the set carries (first line with labels)."""
    with path.open(encoding="utf-8") as handle:
        for text in handle:
            if text.strip():
                labels = json.loads(text).get("labels") or {}
                for label in LABEL_SCORES:
                    if label in labels:
                        return label
                return None
    return None


def judge_env() -> dict[str, str]:
    """The settings a run changes from the defaults: the ``GROUNDWATCH_*`` variables of this process
    (recorded with each row, so a table shows what it measured)."""
    return {key: value for key, value in os.environ.items() if key.startswith("GROUNDWATCH_")}


def balanced_sample(data: Path, n: int, work: Path) -> Path:
    """The first ``n // 2`` lines of each label class (file order), as a new file under ``work``.

    For sets whose first lines hold one class only (DelucionQA's first 100 answers are no refusals):
    balanced accuracy does not depend on prevalence, so a class-balanced sample measures the same
    thing with both classes present.
    """
    label = set_label(data)
    per_class: dict[int, list[str]] = {0: [], 1: []}
    with data.open(encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            value = (json.loads(text).get("labels") or {}).get(label)
            if value in (0, 1) and len(per_class[int(value)]) < n // 2:
                per_class[int(value)].append(text.rstrip("\n"))
    out = work / "samples" / f"{data.stem}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [t for pair in zip_longest(per_class[0], per_class[1]) for t in pair if t is not None]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def run_one(
    data: Path,
    judge: str,
    limit: int | None,
    work: Path,
    label: str | None,
    nice: int,
    timeout: float | None = None,
    sample: str = "first",
) -> dict[str, Any]:
    out = work / judge / f"{data.stem}.json"
    source = data
    if sample == "balanced" and limit is not None:
        source = balanced_sample(data, limit, work / judge)
        limit = None
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in (out, out.with_name(f"{out.stem}.evaluations.jsonl"), out.with_suffix(".meta.json")):
        stale.unlink(missing_ok=True)  # a run stopped early must not pass for the previous one
    env = judge_env()
    cmd = [sys.executable, "-m", "groundwatch.cli", "eval", str(source), "--judge", judge, "--out", str(out)]
    cmd += ["--quiet"] + (["--limit", str(limit)] if limit is not None else [])
    if judge in LLM_JUDGES:
        # one request at a time reaches llama.cpp anyway; on a refusal set the refusal prompt is the only
        # call, and 8 interactions at once fill its batches of 8 texts (the default refusal_batch_size)
        cmd += ["--concurrency", "8" if label == "answer_refusal" else "2"]
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]
    shown = " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(cmd)
    print(f"[accuracy] {shown}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    stopped = False
    try:
        proc = subprocess.run(
            cmd, env={**os.environ, **env}, cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:  # the child is killed; its finished Evaluations stay
        stopped = True
        code = -9
        raw = exc.stderr or b""
        stderr = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    wall = time.perf_counter() - started
    meta = {
        "command": shown.strip(),
        "env": env,
        "wall_seconds": wall,
        "exit_code": code,
        "stopped_after_timeout_s": timeout if stopped else None,
        "limit": limit,
        "input": str(source),
        "sample": sample if source != data else "first",
        "stderr_tail": stderr[-2000:],
        "machine": machine(),
    }
    (out.with_suffix(".meta.json")).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if code != 0:
        print(
            f"[accuracy] {data.name} with {judge}: exit {code}\n{stderr[-2000:]}",
            file=sys.stderr,
        )
    return meta


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def read_evaluations(path: Path) -> list[Evaluation]:
    if not path.is_file():
        return []
    out = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if text.strip():
            out.append(Evaluation.model_validate_json(text))
    return out


def _threshold(settings: Settings, judge: str, score: str) -> float:
    if score in FLAG_SCORES:
        return 0.5
    return settings.pipeline.threshold_for(score, judge)


def tabulate(data: Path, judge: str, work: Path, settings: Settings) -> Row | None:
    out = work / judge / f"{data.stem}.json"
    evaluations = read_evaluations(out.with_name(f"{out.stem}.evaluations.jsonl"))
    if not evaluations:
        return None
    meta_path = out.with_suffix(".meta.json")
    meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    report: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    source = Path(meta["input"]) if meta.get("input") else data
    dataset = read_dataset(source, settings.limits, meta.get("limit"))
    by_id = {line.interaction.interaction_id: line for line in dataset.lines}
    rows: list[tuple[DatasetLine, Evaluation]] = [
        (by_id[e.interaction_id], e) for e in evaluations if e.interaction_id in by_id
    ]
    judge_settings = settings.with_changes(judge={"kind": judge})
    reports = label_reports(rows, judge_settings)
    if not reports:
        return None
    label, block = next(iter(reports.items()))
    primary = block.primary
    labeled = [(line.interaction.labels or {}).get(label) for line, _ in rows]
    y_all = [int(v) for v in labeled if v in (0, 1)]
    getter = SCORES[primary.score]
    scored = [(int(lab), getter(ev)) for (_, ev), lab in zip(rows, labeled, strict=True) if lab in (0, 1)]
    pairs = [(lab, s) for lab, s in scored if s is not None]
    curve = {
        f"{t:.2f}": balanced_accuracy([p[0] for p in pairs], [float(p[1]) for p in pairs], t)
        if pairs
        else None
        for t in CURVE
    }
    length_auc = length_bacc = None
    if label == "grounded" and y_all:
        lengths = [
            (int((line.interaction.labels or {})[label]), -float(len(line.interaction.answer)))
            for line, _ in rows
            if (line.interaction.labels or {}).get(label) in (0, 1)
        ]
        ys, ss = [p[0] for p in lengths], [p[1] for p in lengths]
        length_auc = roc_auc(ys, ss)
        best = best_threshold(ys, ss)
        length_bacc = best.balanced_accuracy if best else None
    lexical_same: dict[str, float | None] = {}
    if judge != "lexical":
        lex_rows = [
            (by_id[e.interaction_id], e)
            for e in read_evaluations(work / "lexical" / f"{data.stem}.evaluations.jsonl")
            if e.interaction_id in {ev.interaction_id for _, ev in rows} and e.interaction_id in by_id
        ]
        lex_settings = settings.with_changes(judge={"kind": "lexical"})
        lex_block = label_reports(lex_rows, lex_settings).get(label) if lex_rows else None
        if lex_block is not None:
            lexical_same = {
                "n": float(lex_block.primary.n),
                "roc_auc": lex_block.primary.roc_auc,
                "balanced_accuracy": lex_block.primary.balanced_accuracy,
            }
    peers = block.peers
    secondary = {
        o.score: {"roc_auc": o.roc_auc, "balanced_accuracy": o.balanced_accuracy, "threshold": o.threshold}
        for o in block.others
    }
    return Row(
        set=data.stem,
        label=label,
        judge=judge,
        score=primary.score,
        n=primary.n,
        lines=len(dataset.lines),
        complete=bool(report) and report.get("evaluated", 0) + report.get("failed", 0) >= len(dataset.lines),
        errors=int(report.get("failed", 0)),
        roc_auc=primary.roc_auc,
        threshold=primary.threshold,
        balanced_accuracy=primary.balanced_accuracy,
        best_threshold=primary.best.threshold if primary.best else None,
        best_balanced_accuracy=primary.best.balanced_accuracy if primary.best else None,
        wall_seconds=meta.get("wall_seconds", report.get("wall_seconds")),
        input_tokens=sum(e.input_tokens for e in evaluations),
        output_tokens=sum(e.output_tokens for e in evaluations),
        judge_calls=sum(e.judge_calls for e in evaluations),
        peers=peers.peers if peers else {},
        peer_cases=peers.n if peers else 0,
        ours_on_peer_cases=peers.ours_balanced_accuracy if peers else None,
        length_auc=length_auc,
        length_best_balanced_accuracy=length_bacc,
        secondary=secondary,
        lexical_same_cases=lexical_same,
        curve=curve,
        env=meta.get("env", {}),
        command=meta.get("command", ""),
    )


def _f(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def markdown(rows: Sequence[Row]) -> str:
    lines = [
        "| set | label: score | judge | n | ROC AUC | bal.acc @ thr | best bal.acc @ thr | wall s "
        "| tokens in+out | judge calls | lexical on the same cases: AUC / bal.acc "
        "| peers' bal.acc on the same cases | length-only AUC / best bal.acc |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = f"{r.n}" + ("" if r.complete else f" (partial of {r.lines})")
        peers = ", ".join(f"{k} {_f(v)}" for k, v in sorted(r.peers.items())) if r.peers else ""
        if r.peers:
            peers = f"ours {_f(r.ours_on_peer_cases)}; " + peers
        length = (
            f"{_f(r.length_auc)} / {_f(r.length_best_balanced_accuracy)}" if r.length_auc is not None else ""
        )
        lex = ""
        if r.lexical_same_cases:
            same = r.lexical_same_cases
            lex = f"{_f(same.get('roc_auc'))} / {_f(same.get('balanced_accuracy'))}"
        lines.append(
            f"| {r.set} | {r.label}: {r.score} | {r.judge} | {n} | {_f(r.roc_auc)} | "
            f"{_f(r.balanced_accuracy)} @ {r.threshold:g} | {_f(r.best_balanced_accuracy)} @ "
            f"{_f(r.best_threshold, 3)} | {_f(r.wall_seconds, 0)} | {r.input_tokens}+{r.output_tokens} | "
            f"{r.judge_calls} | {lex} | {peers} | {length} |"
        )
    secondary = [r for r in rows if r.secondary]
    if secondary:
        lines += [
            "",
            "Secondary scores (same cases):",
            "",
            "| set | judge | score | ROC AUC | bal.acc @ thr |",
        ]
        lines.append("|---|---|---|---|---|")
        for r in secondary:
            for name, v in r.secondary.items():
                thr = v["threshold"]
                lines.append(
                    f"| {r.set} | {r.judge} | {name} | {_f(v['roc_auc'])} | {_f(v['balanced_accuracy'])} @ "
                    f"{'n/a' if thr is None else f'{thr:g}'} |"
                )
    curves = [r for r in rows if r.curve and r.label != "answer_refusal"]
    if curves:
        shown = [f"{t:.2f}" for t in CURVE if 0.2 <= t <= 1.0]
        lines += ["", "Threshold curve: balanced accuracy of the primary score at each threshold", ""]
        lines.append("| set | judge | " + " | ".join(shown) + " |")
        lines.append("|---|---|" + "---|" * len(shown))
        for r in curves:
            lines.append(
                f"| {r.set} | {r.judge} | " + " | ".join(_f(r.curve.get(t), 3) for t in shown) + " |"
            )
    return "\n".join(lines) + "\n"


def parse_limits(values: Sequence[str]) -> dict[str, int]:
    out = {}
    for value in values:
        judge, sep, number = value.partition("=")
        if not sep or not number.isdigit():
            raise SystemExit(f"--limit-for takes JUDGE=N, not {value!r}")
        out[judge] = int(number)
    return out


def run_cv(args: argparse.Namespace) -> int:
    """``--cv``: benchmarks/accuracy_cv.py with this command's data, sets, folds and seed."""
    cmd = [sys.executable, str(REPO / "benchmarks" / "accuracy_cv.py"), "--data", str(args.data)]
    cmd += ["--k", str(args.k), "--seed", str(args.seed), "--out", str(args.work / "cv.md")]
    cmd += ["--cache", str(args.work / "cv_cache")]
    cmd += ["--sets", args.sets] if args.sets else []
    print(f"[accuracy] {' '.join(cmd)}", file=sys.stderr, flush=True)
    return subprocess.run(cmd, cwd=REPO, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="directory of labeled *.jsonl sets")
    parser.add_argument("--judges", default="lexical", help="comma-separated: lexical,cascade,local,openai")
    parser.add_argument("--sets", default="", help="comma-separated set names (file stems); default: all")
    parser.add_argument("--limit", type=int, default=None, help="lines per set for every judge")
    parser.add_argument(
        "--limit-for", action="append", default=[], help="JUDGE=N: lines per set for one judge"
    )
    parser.add_argument("--work", type=Path, default=REPO / "build" / "accuracy", help="runs go here")
    parser.add_argument("--table", type=Path, default=REPO / "build" / "accuracy" / "accuracy_table.md")
    parser.add_argument("--reuse", action="store_true", help="keep runs whose report exists")
    parser.add_argument("--table-only", action="store_true", help="run nothing; tabulate --work")
    parser.add_argument("--nice", type=int, default=0, help="run LLM-backed evals under nice -n N")
    parser.add_argument(
        "--sample",
        choices=["first", "balanced"],
        default="first",
        help="with --limit N: the first N lines, or the first N/2 of each label class",
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="stop a run after this many seconds (partial n counts)"
    )
    parser.add_argument("--cv", action="store_true", help="cross-validate the lexical judge (accuracy_cv.py)")
    parser.add_argument("--k", type=int, default=5, help="with --cv: folds")
    parser.add_argument("--seed", type=int, default=0, help="with --cv: fold seed")
    args = parser.parse_args(argv)

    if args.cv:
        return run_cv(args)
    if not args.data.is_dir():
        print(
            f"[accuracy] no data directory {args.data}: nothing to measure (pass --data DIR)", file=sys.stderr
        )
        return 0
    sets = sorted(args.data.glob("*.jsonl"))
    wanted = {s for s in args.sets.split(",") if s}
    if wanted:
        sets = [s for s in sets if s.stem in wanted]
    if not sets:
        print(f"[accuracy] no *.jsonl sets in {args.data}", file=sys.stderr)
        return 0
    judges = [j for j in args.judges.split(",") if j]
    limits = parse_limits(args.limit_for)
    settings = Settings()
    rows: list[Row] = []
    for data in sets:
        label = set_label(data)
        for judge in judges:
            out = args.work / judge / f"{data.stem}.json"
            if not args.table_only and not (args.reuse and out.is_file()):
                limit = limits.get(judge, args.limit)
                nice = args.nice if judge in LLM_JUDGES else 0
                run_one(data, judge, limit, args.work, label, nice, args.timeout, args.sample)
            row = tabulate(data, judge, args.work, settings)
            if row is not None:
                rows.append(row)
    table = markdown(rows)
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text(table, encoding="utf-8")
    payload = {"machine": machine(), "rows": [r.__dict__ for r in rows]}
    args.table.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(table)
    print(f"[accuracy] table: {args.table} (+ .json)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
