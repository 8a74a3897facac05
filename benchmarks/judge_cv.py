"""Grouped cross-validation of any judge's finished runs, and the cascade's accuracy against its LLM share.

    python benchmarks/judge_cv.py [--work build/accuracy] [--data ../shared/data] [--judges local,lexical]
        [--k 5] [--seed 0] [--shares 0,0.1,0.25,0.5,0.75,1] [--llm local] [--out build/accuracy/judge_cv.md]
        [--fixed-band LOW:HIGH@THRESHOLD ...] [--score SCORE]

Reads the Evaluations that ``benchmarks/accuracy.py`` wrote (``WORK/JUDGE/SET.evaluations.jsonl``) and
joins them with the labeled lines of the run's input. Per set and judge, on the cases every listed
judge evaluated (so the judges are compared on the same cases):

1. Folds: ``pipeline.report.case_groups`` (cases sharing a question or a source passage are one group)
   and ``pipeline.metrics.crossval.grouped_folds`` (k folds, seed fixed).
2. Out-of-fold balanced accuracy and AUC of the set's primary score: the threshold chosen on the
   training folds (flags, such as refusal, at 0.5), and at the judge's shipped operating threshold
   (``PipelineSettings.threshold_for``; no choice at all). Mean and sd over the folds.
3. Cascade curve (with ``--llm`` and the lexical judge both present): for a target share s of cases sent
   to the LLM, the training folds choose the lexical threshold, the band around it holding the share s of
   training cases nearest to it (by score distance; the closed interval takes in every tie, so the
   realised share can be larger), and the LLM's threshold on the training cases inside the band;
   the held-out fold is decided by the LLM inside the band and by the lexical judge outside. Reported: the
   realised LLM share and out-of-fold balanced accuracy at each s. This is a simulation at the level of
   the case (the product's cascade decides per hypothesis: for one-sentence answers the two coincide).

4. Fixed bands (``--fixed-band``, with the curve): the product's cascade with a band and threshold
   given in advance, as shipped (the LLM's score inside the band, the lexical judge's outside, one
   threshold): the realised LLM share and balanced accuracy on each fold, nothing chosen on any.
``--score`` scores every set by another score than its primary one.

Writes a markdown report (``--out``) and the figures as JSON beside it. The thresholds and the band are
never chosen on the fold they are scored on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.dataset import DatasetLine, read_dataset  # noqa: E402
from pipeline.metrics.classification import balanced_accuracy_of  # noqa: E402
from pipeline.metrics.crossval import (  # noqa: E402
    Scored,
    choose_threshold,
    cross_validate,
    fixed_threshold,
    grouped_folds,
    mean_sd,
)
from pipeline.report import FLAG_SCORES, LABEL_SCORES, SCORES, case_groups  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.settings import Settings, settings_from_env  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data"


@dataclass(frozen=True)
class Cases:
    """One set's cases that every judge evaluated: labels, groups and each judge's primary score."""

    set: str
    label: str
    score: str
    labels: list[int]
    groups: list[int]
    scores: dict[str, list[float]]


@dataclass(frozen=True)
class JudgeFigures:
    set: str
    judge: str
    n: int
    chosen_bacc: tuple[float | None, float | None]
    chosen_auc: tuple[float | None, float | None]
    shipped_threshold: float
    shipped_bacc: tuple[float | None, float | None]
    fold_thresholds: list[float]


@dataclass(frozen=True)
class CurvePoint:
    target_share: float
    llm_share: tuple[float | None, float | None]
    bacc: tuple[float | None, float | None]
    bands: list[tuple[float, float] | None]  # per fold: lexical [low, high] to the LLM (None: none)
    lexical_thresholds: list[float]  # per fold: the lexical threshold the band is centred on


def read_run(work: Path, judge: str, stem: str) -> tuple[Path | None, dict[str, Evaluation]]:
    """The input file of a judge's run of a set and its Evaluations by interaction id."""
    path = work / judge / f"{stem}.evaluations.jsonl"
    if not path.is_file():
        return None, {}
    meta_path = work / judge / f"{stem}.meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    evaluations = [
        Evaluation.model_validate_json(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()
    ]
    source = Path(meta["input"]) if meta.get("input") else None
    return source, {e.interaction_id: e for e in evaluations}


def label_of(lines: Sequence[DatasetLine]) -> str | None:
    for line in lines:
        for label in LABEL_SCORES:
            if (line.interaction.labels or {}).get(label) in (0, 1):
                return label
    return None


def cases(
    data: Path, work: Path, judges: Sequence[str], settings: Settings, score: str | None = None
) -> Cases | None:
    """The cases of ``data`` that every judge in ``judges`` scored, in file order."""
    runs = {judge: read_run(work, judge, data.stem) for judge in judges}
    if any(not evs for _, evs in runs.values()):
        return None
    lines = {line.interaction.interaction_id: line for line in read_dataset(data, settings.limits).lines}
    for source, _ in runs.values():  # a class-balanced sample is a file of its own
        if source is not None and source.is_file():
            for line in read_dataset(source, settings.limits).lines:
                lines.setdefault(line.interaction.interaction_id, line)
    label = label_of(list(lines.values()))
    if label is None:
        return None
    score = score or LABEL_SCORES[label][0]
    getter = SCORES[score]
    common = [i for i in lines if all(i in evs for _, evs in runs.values())]
    kept: list[str] = []
    for i in common:
        value = (lines[i].interaction.labels or {}).get(label)
        if value in (0, 1) and all(getter(evs[i]) is not None for _, evs in runs.values()):
            kept.append(i)
    return Cases(
        set=data.stem,
        label=label,
        score=score,
        labels=[int((lines[i].interaction.labels or {})[label]) for i in kept],
        groups=case_groups([lines[i] for i in kept]),
        scores={judge: [float(getter(runs[judge][1][i]) or 0.0) for i in kept] for judge in judges},
    )


def judge_figures(c: Cases, judge: str, settings: Settings, k: int, seed: int) -> JudgeFigures:
    folds = grouped_folds(c.groups, k, seed)
    scored = {c.set: Scored(c.labels, c.scores[judge], folds)}
    flag = c.score in FLAG_SCORES
    shipped = 0.5 if flag else settings.pipeline.threshold_for(c.score, judge)
    chosen = cross_validate(scored, fixed_threshold(0.5) if flag else _choose, k)[c.set]
    at_shipped = cross_validate(scored, fixed_threshold(shipped), k)[c.set]
    return JudgeFigures(
        set=c.set,
        judge=judge,
        n=len(c.labels),
        chosen_bacc=mean_sd([f.balanced_accuracy for f in chosen]),
        chosen_auc=mean_sd([f.roc_auc for f in chosen]),
        shipped_threshold=shipped,
        shipped_bacc=mean_sd([f.balanced_accuracy for f in at_shipped]),
        fold_thresholds=[f.threshold for f in chosen],
    )


def _choose(parts: Sequence[tuple[Sequence[int], Sequence[float]]]) -> float:
    (labels, scores), *_ = parts
    return choose_threshold(labels, scores)


def _band(lexical: np.ndarray, threshold: float, share: float) -> tuple[float, float]:
    """The closed interval around ``threshold`` holding the ``share`` of ``lexical`` nearest to it."""
    n = round(share * lexical.size)
    if n <= 0:
        return (np.inf, -np.inf)
    nearest = np.sort(lexical[np.argsort(np.abs(lexical - threshold), kind="stable")[:n]])
    return float(nearest[0]), float(nearest[-1])


def cascade_curve(c: Cases, llm: str, shares: Sequence[float], k: int, seed: int) -> list[CurvePoint]:
    folds = np.asarray(grouped_folds(c.groups, k, seed))
    y = np.asarray(c.labels)
    lex, model = np.asarray(c.scores["lexical"]), np.asarray(c.scores[llm])
    points = []
    for share in shares:
        baccs: list[float | None] = []
        used: list[float | None] = []
        bands: list[tuple[float, float] | None] = []
        thresholds: list[float] = []
        for fold in range(k):
            train, test = folds != fold, folds == fold
            if not test.any():
                continue
            t_lex = choose_threshold(list(y[train]), list(lex[train]))
            lo, hi = _band(lex[train], t_lex, share)
            bands.append((lo, hi) if lo <= hi else None)
            thresholds.append(t_lex)
            inside_train = train & (lex >= lo) & (lex <= hi)
            t_llm = (
                choose_threshold(list(y[inside_train]), list(model[inside_train]))
                if inside_train.any()
                else 0.5
            )
            inside = (lex >= lo) & (lex <= hi)
            predicted = np.where(inside, model >= t_llm, lex >= t_lex)
            baccs.append(balanced_accuracy_of(list(y[test]), [int(v) for v in predicted[test]]))
            used.append(float(inside[test].mean()))
        points.append(CurvePoint(share, mean_sd(used), mean_sd(baccs), bands, thresholds))
    return points


@dataclass(frozen=True)
class FixedBand:
    """A cascade band given in advance (no choice on any fold): ``low:high@threshold``."""

    low: float
    high: float
    threshold: float

    @classmethod
    def parse(cls, text: str) -> FixedBand:
        band, _, threshold = text.partition("@")
        low, _, high = band.partition(":")
        return cls(float(low), float(high), float(threshold or 0.5))

    def __str__(self) -> str:
        return f"[{self.low:g}, {self.high:g}] @ {self.threshold:g}"


def fixed_band(c: Cases, llm: str, band: FixedBand, k: int, seed: int) -> CurvePoint:
    """The product's cascade with a fixed band, per fold: the LLM's score inside the band, the lexical
    judge's outside, one threshold; the realised LLM share and balanced accuracy of each fold."""
    folds = np.asarray(grouped_folds(c.groups, k, seed))
    y = np.asarray(c.labels)
    lex, model = np.asarray(c.scores["lexical"]), np.asarray(c.scores[llm])
    inside = (lex >= band.low) & (lex <= band.high)
    predicted = np.where(inside, model, lex) >= band.threshold
    tests = [folds == fold for fold in range(k) if (folds == fold).any()]
    baccs = [balanced_accuracy_of(list(y[t]), [int(v) for v in predicted[t]]) for t in tests]
    used: list[float | None] = [float(inside[t].mean()) for t in tests]
    return CurvePoint(-1.0, mean_sd(used), mean_sd(baccs), [(band.low, band.high)], [band.threshold])


def _f(pair: tuple[float | None, float | None]) -> str:
    mean, sd = pair
    return "-" if mean is None else f"{mean:.3f} ± {sd or 0.0:.3f}"


def _bands(bands: Sequence[tuple[float, float] | None]) -> str:
    return ", ".join("none" if b is None else f"[{b[0]:.2f}, {b[1]:.2f}]" for b in bands)


def render(
    figures: Sequence[JudgeFigures],
    curves: dict[str, list[CurvePoint]],
    command: str,
    fixed: dict[str, list[tuple[FixedBand, CurvePoint]]] | None = None,
) -> str:
    lines = [
        "# Grouped cross-validation of judge runs",
        "",
        f"`{command}`",
        "",
        "| set | judge | n | bal.acc, threshold from training folds | AUC | bal.acc @ shipped threshold |",
        "|---|---|---|---|---|---|",
    ]
    for f in figures:
        lines.append(
            f"| {f.set} | {f.judge} | {f.n} | {_f(f.chosen_bacc)} | {_f(f.chosen_auc)} | "
            f"{_f(f.shipped_bacc)} @ {f.shipped_threshold:.2f} |"
        )
    for name, points in curves.items():
        lines += ["", f"## Cascade on {name}: accuracy against the share of cases sent to the LLM", ""]
        lines += [
            "| target share | realised share | bal.acc | band per fold (lexical scores sent to the LLM) "
            "| lexical threshold per fold |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {p.target_share:.2f} | {_f(p.llm_share)} | {_f(p.bacc)} | {_bands(p.bands)} | "
            f"{', '.join(f'{t:.2f}' for t in p.lexical_thresholds)} |"
            for p in points
        ]
    for name, rows in (fixed or {}).items():
        lines += ["", f"## Fixed cascade bands on {name} (nothing chosen on the folds)", ""]
        lines += ["| band @ threshold | LLM share | bal.acc |", "|---|---|---|"]
        lines += [f"| {band} | {_f(p.llm_share)} | {_f(p.bacc)} |" for band, p in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=REPO / "build" / "accuracy")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--judges", default="local,lexical", help="judges compared on the cases all ran")
    parser.add_argument("--llm", default="local", help="the LLM judge of the cascade curve ('' = none)")
    parser.add_argument("--shares", default="0,0.1,0.25,0.5,0.75,1")
    parser.add_argument(
        "--fixed-band", action="append", default=[], type=FixedBand.parse, metavar="LOW:HIGH@THRESHOLD",
        help="also score the cascade with this band and threshold, chosen on no fold (repeatable; "
        "a band no score reaches, such as 2:2, is the lexical judge alone)",
    )  # fmt: skip
    parser.add_argument("--score", help="score every set by this score (pipeline.report.SCORES) instead")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "accuracy" / "judge_cv.md")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"[judge_cv] no labeled data in {args.data}: nothing to do", file=sys.stderr)
        return 0
    settings = settings_from_env({})
    judges = [j for j in args.judges.split(",") if j]
    shares = [float(s) for s in args.shares.split(",")]
    figures: list[JudgeFigures] = []
    curves: dict[str, list[CurvePoint]] = {}
    fixed: dict[str, list[tuple[FixedBand, CurvePoint]]] = {}
    for data in sorted(args.data.glob("*.jsonl")):
        c = cases(data, args.work, judges, settings, args.score)
        if c is None or len(set(c.labels)) < 2:
            continue
        figures += [judge_figures(c, judge, settings, args.k, args.seed) for judge in judges]
        if args.llm and args.llm in judges and "lexical" in judges and c.score not in FLAG_SCORES:
            curves[c.set] = cascade_curve(c, args.llm, shares, args.k, args.seed)
            fixed[c.set] = [(b, fixed_band(c, args.llm, b, args.k, args.seed)) for b in args.fixed_band]
    command = "python benchmarks/judge_cv.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(figures, curves, command.strip(), fixed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    payload = {
        "figures": [asdict(f) for f in figures],
        "curves": {k: [asdict(p) for p in v] for k, v in curves.items()},
        "fixed_bands": {k: [{"band": str(b), **asdict(p)} for b, p in v] for k, v in fixed.items()},
    }
    args.out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
