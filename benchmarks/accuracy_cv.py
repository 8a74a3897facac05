"""Grouped k-fold cross-validation and rule ablation of the lexical judge on the labeled dev sets.

    python benchmarks/accuracy_cv.py [--data ../shared/data] [--k 5] [--seed 0]
        [--out build/accuracy/cv.md] [--sets a,b] [--no-nested]
    python benchmarks/accuracy_cv.py --switches a,b [--baseline OTHER/cv.json]   # quick check

With ``--switches`` only the shipped defaults are cross-validated and only the named switches are
turned off from them (step 4 for those switches, no elimination, no nested estimate): the quick check of
a new or changed rule. ``--baseline`` (any run's ``cv.json``, e.g. of the code before a change, made
with the same data, k and seed) adds the shipped defaults' change against it, fold by fold (this run
minus the baseline on the same fold, mean and sd), with a threshold per set and with the one
threshold shared by the grounding sets.

What it does (every figure out-of-fold unless it says in-sample):

0. Lines. Each set's primary score (``pipeline.report.LABEL_SCORES``) and, for correctness, the other
   direction (``SECONDARY``: question + ground truth => answer, its own NLI pair) as a line of its own.
1. Groups. Cases that share a question or a source passage are one group (``group_keys``: the
   normalised question, unless one question is shared by over half of the set, as FaithBench's
   "Summarize the passage."; and the first 60 characters of the first context passage, so lightly
   edited copies of a passage stay together); groups are the connected components of those keys.
   ``pipeline.metrics.crossval.grouped_folds`` puts each group in one of k folds (seed fixed).
2. Scores. The lexical judge runs in process (``pipeline.evaluator.Evaluator``, the same pipeline as
   ``groundwatch eval``) once per configuration over every set; a configuration is a
   ``LexicalOptions`` plus the pipeline's ``exact_match`` setting. Scores are cached under
   ``build/accuracy/cv_cache`` by configuration and input file.
3. Thresholds. For each fold the operating threshold is chosen on the other folds (the highest
   balanced accuracy there) and the fold is scored with it: per set, and for the two grounding sets
   also one threshold shared by both (the rule the settings' default follows). Flags (refusal) are
   scored at 0.5. Mean and sd over the k folds.
4. Ablation. From the configuration with every rule on (``FULL``), each switch (every rule, feature
   and word list of ``pipeline/judges/lexical.py``, each refusal pattern, ``exact_match``) is turned
   off alone; the table gives the out-of-fold change on every set (on minus off, per fold, mean and
   sd). ``keep_rule``: a rule stays when the mean change over the sets is positive and on no set the
   mean change is below minus its sd. ``eliminate``: the rules that fail it are then dropped one at a
   time, most harmful first, each re-tested against what is left (two rules that duplicate each other
   each look useless alone; this drops one of them, not both).
5. Nested estimate. The whole procedure (ablation, rule choice, threshold) is repeated with only the
   training folds of each outer fold (their inner folds are the k-1 training folds) and the chosen
   configuration is scored on the outer fold: the honest figure for "rules and thresholds chosen on
   these dev files".

Writes a markdown report (``--out``) and the same figures as JSON beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from groundwatch.judging import evaluate_all
from pipeline.dataset import DatasetLine, read_dataset
from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import SWITCHES, LexicalJudge, LexicalOptions
from pipeline.metrics.classification import best_threshold, roc_auc
from pipeline.metrics.crossval import (
    Chooser,
    FoldResult,
    Scored,
    choose_shared_threshold,
    cross_validate,
    fixed_threshold,
    grouped_folds,
    mean_sd,
)
from pipeline.metrics.groups import group_keys
from pipeline.refusal_phrases import REFUSAL_PATTERNS
from pipeline.report import FLAG_SCORES, LABEL_SCORES, SCORES
from schemas.settings import Settings

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data"
DEFAULT_OUT = REPO / "build" / "accuracy" / "cv.md"
CACHE = REPO / "build" / "accuracy" / "cv_cache"
GROUNDING_SHARED = ("grounding_faithbench", "grounding_halueval_qa")


def judge_source() -> bytes:
    """The code whose change invalidates cached scores: the lexical judge, its refusal phrases and text
    normalisation. The judge's module docstring and its options model (with the default refusal list
    before it) are left out: a configuration's key holds every option's value, so a changed default or
    description scores nothing differently."""
    out = []
    for name in ("pipeline/judges/lexical.py", "pipeline/refusal_phrases.py", "pipeline/text_normalise.py"):
        path = REPO / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if name.endswith("lexical.py"):
            text = text[text.index('"""', 3) + 3 :]  # after the module docstring
            start, end = text.find("#: refusal patterns off by default"), text.find("#: the former name")
            if 0 <= start < end:
                text = text[:start] + text[end:]
        out.append(text.encode())
    return b"".join(out)


@dataclass(frozen=True)
class Config:
    """One judge configuration: the lexical options and the pipeline's exact-match setting."""

    options: LexicalOptions = field(default_factory=LexicalOptions)
    exact_match: bool = True

    def key(self) -> str:
        payload = {**self.options.model_dump(mode="json"), "exact_match": self.exact_match}
        payload["refusal_off"] = sorted(payload["refusal_off"])
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def without(self, switch: str) -> Config:
        """This configuration with one switch off (``refusal:NAME`` a refusal pattern)."""
        if switch == "exact_match":
            return Config(self.options, False)
        if switch.startswith("refusal:"):
            off = self.options.refusal_off | {switch.split(":", 1)[1]}
            return Config(self.options.model_copy(update={"refusal_off": off}), self.exact_match)
        return Config(self.options.model_copy(update={switch: False}), self.exact_match)

    def dropping(self, switches: Sequence[str]) -> Config:
        config = self
        for switch in switches:
            config = config.without(switch)
        return config


#: every rule on, every refusal pattern used, exact match on
FULL = Config(LexicalOptions(**{s: True for s in SWITCHES}, refusal_off=frozenset()), True)
JUDGE_SOURCE = judge_source()
#: the switches the ablation turns off one at a time
ALL_SWITCHES: tuple[str, ...] = (
    *SWITCHES,
    *(f"refusal:{name}" for name in REFUSAL_PATTERNS),
    "exact_match",
)


@dataclass
class LabeledSet:
    name: str
    label: str
    score: str
    ids: list[str]
    labels: list[int]
    groups: list[int]
    folds: list[int]
    answer_lengths: list[int]
    lines: list[DatasetLine] = field(repr=False, default_factory=list)


# -- groups -------------------------------------------------------------------------------------------


# -- data and scores ----------------------------------------------------------------------------------


#: scores measured beside a label's primary one: the other direction of the correctness comparison (its
#: own NLI pair: question + ground truth => answer); the other secondary lines are derived from these
SECONDARY: dict[str, tuple[str, ...]] = {"correct": ("ground_truth_entails_answer",)}


def load_sets(path: Path, k: int, seed: int) -> list[LabeledSet]:
    """The set's primary line (named by the file) and its ``SECONDARY`` lines (``stem.score``)."""
    data = load_set(path, k, seed)
    if data is None:
        return []
    extra = [
        LabeledSet(**{**data.__dict__, "name": f"{data.name}.{score}", "score": score})
        for score in SECONDARY.get(data.label, ())
    ]
    return [data, *extra]


def load_set(path: Path, k: int, seed: int) -> LabeledSet | None:
    dataset = read_dataset(path, Settings().limits, None)
    lines = [ln for ln in dataset.lines if ln.interaction.labels]
    if not lines:
        return None
    first_labels = lines[0].interaction.labels or {}
    label = next((lab for lab in LABEL_SCORES if lab in first_labels), None)
    if label is None:
        return None
    lines = [ln for ln in lines if (ln.interaction.labels or {}).get(label) in (0, 1)]
    groups = group_keys(
        [ln.interaction.question for ln in lines],
        [ln.interaction.contexts[0].text if ln.interaction.contexts else "" for ln in lines],
    )
    return LabeledSet(
        name=path.stem,
        label=label,
        score=LABEL_SCORES[label][0],
        ids=[ln.interaction.interaction_id for ln in lines],
        labels=[int((ln.interaction.labels or {})[label]) for ln in lines],
        groups=groups,
        folds=grouped_folds(groups, k, seed),
        answer_lengths=[len(ln.interaction.answer) for ln in lines],
        lines=lines,
    )


async def _run(config: Config, data: LabeledSet) -> list[float | None]:
    settings = Settings().with_changes(
        judge={"kind": "lexical"}, pipeline={"exact_match": config.exact_match}
    )
    evaluator = Evaluator(LexicalJudge(config.options), settings)
    try:
        rows, failures = await evaluate_all(data.lines, evaluator, 32)
    finally:
        await evaluator.aclose()
    if failures:
        raise RuntimeError(f"{data.name}: {len(failures)} evaluations failed, first: {failures[0].reason}")
    by_id = {ev.interaction_id: SCORES[data.score](ev) for _, ev in rows}
    return [by_id[i] for i in data.ids]


def scores_for(config: Config, data: LabeledSet, source: Path, cache: Path) -> list[float | None]:
    """The set's primary score per case under ``config`` (cached by configuration, input file and the
    lexical judge's source, so an edited rule is scored afresh)."""
    digest = hashlib.sha256(source.read_bytes() + JUDGE_SOURCE).hexdigest()[:12]
    path = cache / f"{data.name}-{digest}-{config.key()}.json"
    if path.is_file():
        cached: list[float | None] = json.loads(path.read_text())
        return cached
    values = asyncio.run(_run(config, data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))
    return values


# -- cross-validation ---------------------------------------------------------------------------------


def scored(data: LabeledSet, values: Sequence[float | None]) -> Scored:
    """The set's scored cases (a case without a score, e.g. no context, is left out)."""
    keep = [i for i, v in enumerate(values) if v is not None]
    return Scored(
        labels=[data.labels[i] for i in keep],
        scores=[float(values[i]) for i in keep],  # type: ignore[arg-type]
        folds=[data.folds[i] for i in keep],
    )


def chooser_for(score: str) -> Chooser:
    return fixed_threshold(0.5) if score in FLAG_SCORES else choose_shared_threshold


def restrict(s: Scored, folds: Sequence[int]) -> Scored:
    """The cases of the given folds, their folds renumbered 0..len(folds)-1 in the given order."""
    index = {f: i for i, f in enumerate(folds)}
    keep = [i for i, f in enumerate(s.folds) if f in index]
    return Scored(
        labels=[s.labels[i] for i in keep],
        scores=[s.scores[i] for i in keep],
        folds=[index[s.folds[i]] for i in keep],
    )


def per_set_cv(sets: Mapping[str, tuple[Scored, str]], k: int) -> dict[str, list[FoldResult]]:
    """Out-of-fold results with each set's threshold chosen on its own training folds."""
    return {name: cross_validate({name: s}, chooser_for(score), k)[name] for name, (s, score) in sets.items()}


@dataclass
class Effect:
    """The out-of-fold change on one set when a rule is turned off: on minus off, per fold."""

    balanced_accuracy: tuple[float | None, float | None]  # mean, sd over folds
    roc_auc: tuple[float | None, float | None]


def effect(on: Sequence[FoldResult], off: Sequence[FoldResult]) -> Effect:
    def deltas(attr: str) -> list[float | None]:
        out: list[float | None] = []
        for a, b in zip(on, off, strict=True):
            va, vb = getattr(a, attr), getattr(b, attr)
            out.append(None if va is None or vb is None else va - vb)
        return out

    return Effect(mean_sd(deltas("balanced_accuracy")), mean_sd(deltas("roc_auc")))


def keep_rule(effects: Mapping[str, Effect]) -> bool:
    """A rule stays when it helps on average over the sets (mean change in balanced accuracy > 0) and
    hurts no set by more than that set's sd of the change over folds."""
    means = [e.balanced_accuracy[0] or 0.0 for e in effects.values()]
    if not means or sum(means) / len(means) <= 0.0:
        return False
    for e in effects.values():
        mean, sd = e.balanced_accuracy
        if mean is not None and mean < -(sd or 0.0):
            return False
    return True


ScoreFn = Callable[[Config], Mapping[str, tuple[Scored, str]]]


def ablate(
    base: Config, switches: Sequence[str], score_fn: ScoreFn, k: int
) -> dict[str, tuple[dict[str, Effect], bool]]:
    """Each switch turned off alone from ``base``: its effect on every set and whether it stays."""
    on = per_set_cv(score_fn(base), k)
    out: dict[str, tuple[dict[str, Effect], bool]] = {}
    for switch in switches:
        off = per_set_cv(score_fn(base.without(switch)), k)
        effects = {name: effect(on[name], off[name]) for name in on}
        out[switch] = (effects, keep_rule(effects))
    return out


def eliminate(
    base: Config, switches: Sequence[str], score_fn: ScoreFn, k: int
) -> tuple[dict[str, tuple[dict[str, Effect], bool]], list[str]]:
    """The one-at-a-time ablation from ``base`` (the table), then backward elimination: the switches
    that fail ``keep_rule`` there are tried in turn (the most harmful first), each against the
    configuration left by the drops before it, and dropped if it still fails. Rules that only
    duplicate each other (each useless while the other is on) are so dropped one, not both."""
    decisions = ablate(base, switches, score_fn, k)

    def mean_change(switch: str) -> float:
        effects = decisions[switch][0].values()
        return sum(e.balanced_accuracy[0] or 0.0 for e in effects) / max(len(effects), 1)

    candidates = sorted(
        (sw for sw, (_, kept) in decisions.items() if not kept), key=lambda sw: (mean_change(sw), sw)
    )
    current, dropped = base, []
    for switch in candidates:
        on = per_set_cv(score_fn(current), k)
        off = per_set_cv(score_fn(current.without(switch)), k)
        if not keep_rule({name: effect(on[name], off[name]) for name in on}):
            current = current.without(switch)
            dropped.append(switch)
    return decisions, dropped


def nested(
    base: Config, switches: Sequence[str], score_fn: ScoreFn, k: int
) -> tuple[dict[str, list[FoldResult]], list[list[str]]]:
    """Rules and thresholds chosen on the training folds of each outer fold, scored on it."""
    results: dict[str, list[FoldResult]] = {}
    dropped_per_fold: list[list[str]] = []
    for outer in range(k):
        training = [f for f in range(k) if f != outer]

        def inner_fn(config: Config, training: list[int] = training) -> dict[str, tuple[Scored, str]]:
            return {n: (restrict(s, training), sc) for n, (s, sc) in score_fn(config).items()}

        _, dropped = eliminate(base, switches, inner_fn, k - 1)
        dropped_per_fold.append(dropped)
        for name, (s, score) in score_fn(base.dropping(dropped)).items():
            fold_results = cross_validate({name: s}, chooser_for(score), k)[name]
            results.setdefault(name, []).append(fold_results[outer])
    return results, dropped_per_fold


def shared_grounding_cv(sets: Mapping[str, tuple[Scored, str]], k: int) -> dict[str, list[FoldResult]]:
    """One threshold for both grounding sets, chosen on their training folds together."""
    both = {n: s for n, (s, _) in sets.items() if n in GROUNDING_SHARED}
    if len(both) < 2:
        return {}
    return cross_validate(both, choose_shared_threshold, k)


# -- in-sample and length figures ---------------------------------------------------------------------


def in_sample(s: Scored) -> dict[str, float | None]:
    best = best_threshold(list(s.labels), list(s.scores))
    return {
        "roc_auc": roc_auc(list(s.labels), list(s.scores)),
        "best_balanced_accuracy": best.balanced_accuracy if best else None,
        "best_threshold": best.threshold if best else None,
    }


def length_stratified_auc(
    labels: Sequence[int], scores: Sequence[float], lengths: Sequence[int]
) -> float | None:
    """ROC AUC within quintiles of answer length, averaged weighted by each stratum's pairs: how well
    the score ranks answers of similar length (a score that only tracks length gets ~0.5)."""
    y, s, n = np.asarray(labels), np.asarray(scores, dtype=float), np.asarray(lengths)
    edges = np.quantile(n, [0.2, 0.4, 0.6, 0.8])
    strata = np.searchsorted(edges, n, side="right")
    total = weight = 0.0
    for b in np.unique(strata):
        mask = strata == b
        auc = roc_auc(y[mask].tolist(), s[mask].tolist())
        if auc is not None:
            pairs = float((y[mask] == 1).sum() * (y[mask] == 0).sum())
            total += auc * pairs
            weight += pairs
    return total / weight if weight else None


# -- report -------------------------------------------------------------------------------------------


def _ms(pair: tuple[float | None, float | None], digits: int = 3) -> str:
    mean, sd = pair
    if mean is None:
        return "n/a"
    return f"{mean:.{digits}f} ± {sd or 0.0:.{digits}f}"


def _signed(pair: tuple[float | None, float | None]) -> str:
    mean, sd = pair
    return "n/a" if mean is None else f"{mean:+.3f} ± {sd or 0.0:.3f}"


def summarise(results: Sequence[FoldResult]) -> dict[str, Any]:
    return {
        "balanced_accuracy": mean_sd([r.balanced_accuracy for r in results]),
        "roc_auc": mean_sd([r.roc_auc for r in results]),
        "thresholds": [round(r.threshold, 4) for r in results],
        "n": sum(r.n for r in results),
    }


def cv_table(
    title: str, blocks: Mapping[str, Mapping[str, Sequence[FoldResult]]], info: Mapping[str, Any]
) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| set | score | configuration | n | groups | bal.acc (mean ± sd over folds) | ROC AUC (mean ± sd) | "
        "thresholds chosen per fold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for config_name, per_set in blocks.items():
        for name, results in per_set.items():
            s = summarise(results)
            thresholds = ", ".join(f"{t:.3g}" for t in s["thresholds"])
            lines.append(
                f"| {name} | {info[name]['score']} | {config_name} | {s['n']} | {info[name]['groups']} | "
                f"{_ms(s['balanced_accuracy'])} | {_ms(s['roc_auc'])} | {thresholds} |"
            )
    return lines


def ablation_table(
    decisions: Mapping[str, tuple[Mapping[str, Effect], bool]], names: Sequence[str]
) -> list[str]:
    lines = [
        "| switch | "
        + " | ".join(f"{n}: Δ bal.acc" for n in names)
        + " | mean Δ bal.acc | "
        + " | ".join(f"{n}: Δ AUC" for n in names)
        + " | stays |",
        "|---|" + "---|" * (2 * len(names) + 2),
    ]
    for switch, (effects, kept) in decisions.items():
        means = [effects[n].balanced_accuracy[0] or 0.0 for n in names]
        lines.append(
            f"| {switch} | "
            + " | ".join(_signed(effects[n].balanced_accuracy) for n in names)
            + f" | {sum(means) / len(means):+.4f} | "
            + " | ".join(_signed(effects[n].roc_auc) for n in names)
            + f" | {'yes' if kept else 'no'} |"
        )
    return lines


# -- main ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", default="", help="comma-separated set names (file stems); default: all")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-nested", action="store_true", help="skip the nested estimate")
    parser.add_argument("--cache", type=Path, default=None, help=f"score cache (default {CACHE})")
    parser.add_argument(
        "--switches", default="", help="comma-separated switches: only these, off from the shipped defaults"
    )
    parser.add_argument("--baseline", type=Path, default=None, help="a cv.json to compare the defaults with")
    args = parser.parse_args(argv)
    cache = args.cache or CACHE
    switches = [s for s in args.switches.split(",") if s]
    unknown = [s for s in switches if s not in ALL_SWITCHES]
    if unknown:
        print(
            f"[accuracy_cv] unknown switch {unknown[0]!r} (known: {', '.join(ALL_SWITCHES)})", file=sys.stderr
        )
        return 2
    baseline = None
    if args.baseline is not None:
        try:
            other = json.loads(args.baseline.read_text(encoding="utf-8"))
            baseline = {
                "per set": other["cv"][DEFAULTS_BLOCK],
                "shared": other.get("shared_grounding", {}).get(SHARED_DEFAULTS, {}),
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"[accuracy_cv] --baseline {args.baseline}: not a cv.json ({exc!r})", file=sys.stderr)
            return 2
    if not args.data.is_dir():
        print(f"[accuracy_cv] no data directory {args.data}: nothing to measure", file=sys.stderr)
        return 0
    started = time.perf_counter()
    paths = sorted(args.data.glob("*.jsonl"))
    wanted = {s for s in args.sets.split(",") if s}
    paths = [p for p in paths if not wanted or p.stem in wanted]
    loaded = {d.name: (d, p) for p in paths for d in load_sets(p, args.k, args.seed)}
    if not loaded:
        print(f"[accuracy_cv] no labeled sets in {args.data}", file=sys.stderr)
        return 0
    memo: dict[str, dict[str, tuple[Scored, str]]] = {}

    def score_fn(config: Config) -> dict[str, tuple[Scored, str]]:
        if config.key() not in memo:
            out = {}
            for name, (data, path) in loaded.items():
                values = scores_for(config, data, path, cache)
                out[name] = (scored(data, values), data.score)
            memo[config.key()] = out
        return memo[config.key()]

    if switches or baseline is not None:
        payload = run_quick(args, loaded, score_fn, switches, baseline)
    else:
        payload = run_all(args, loaded, score_fn)
    payload["wall_seconds"] = time.perf_counter() - started
    payload["command"] = " ".join(["python", "benchmarks/accuracy_cv.py", *(argv or sys.argv[1:])])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(payload.pop("markdown"), encoding="utf-8")
    args.out.with_suffix(".json").write_text(
        json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8"
    )
    print(args.out.read_text())
    print(f"[accuracy_cv] {args.out} (+ .json), {payload['wall_seconds']:.0f} s", file=sys.stderr)
    return 0


def run_all(
    args: argparse.Namespace,
    loaded: Mapping[str, tuple[LabeledSet, Path]],
    score_fn: ScoreFn,
) -> dict[str, Any]:
    k = args.k
    names = list(loaded)
    info = {
        n: {"score": d.score, "groups": len(set(d.groups)), "cases": len(d.ids), "label": d.label}
        for n, (d, _) in loaded.items()
    }
    decisions, dropped = eliminate(FULL, ALL_SWITCHES, score_fn, k)
    selected = FULL.dropping(dropped)
    default = Config(LexicalOptions(), True)
    blocks = {
        "every rule on": per_set_cv(score_fn(FULL), k),
        "selected (rules kept by the ablation)": per_set_cv(score_fn(selected), k),
        DEFAULTS_BLOCK: per_set_cv(score_fn(default), k),
    }
    nested_results: dict[str, list[FoldResult]] = {}
    nested_dropped: list[list[str]] = []
    if not args.no_nested:
        nested_results, nested_dropped = nested(FULL, ALL_SWITCHES, score_fn, k)
        blocks["nested: rules and thresholds chosen on each outer fold's training folds"] = nested_results
    shared = {
        label: shared_grounding_cv(score_fn(cfg), k)
        for label, cfg in (("every rule on", FULL), ("selected", selected), (SHARED_DEFAULTS, default))
    }
    md = [f"Made by `python benchmarks/accuracy_cv.py --k {k} --seed {args.seed}` (data: `{args.data}`).", ""]
    md += cv_table(
        f"Out-of-fold, grouped {k}-fold, threshold per set chosen on the training folds", blocks, info
    )
    md += ["", "### One threshold shared by the two grounding sets (chosen on both sets' training folds)", ""]
    md += ["| configuration | set | bal.acc (mean ± sd) | thresholds per fold |", "|---|---|---|---|"]
    for label, per_set in shared.items():
        for name, results in per_set.items():
            s = summarise(results)
            thresholds = ", ".join(f"{t:.3g}" for t in s["thresholds"])
            md.append(f"| {label} | {name} | {_ms(s['balanced_accuracy'])} | {thresholds} |")
    md += ["", f"### Ablation: out-of-fold change when one switch is off (every rule on = {FULL.key()})", ""]
    md += ablation_table(decisions, names)
    md += ["", f"Dropped by backward elimination with the rule: {', '.join(dropped) or 'none'}", ""]
    if nested_dropped:
        md += ["Dropped within each outer fold (nested):", ""]
        md += [f"- fold {i}: {', '.join(d) or 'none'}" for i, d in enumerate(nested_dropped)]
    md += [
        "",
        "### In-sample (threshold chosen on all cases: optimistic)",
        "",
        "| set | configuration | ROC AUC | best bal.acc @ thr |",
        "|---|---|---|---|",
    ]
    for label, cfg in (("every rule on", FULL), ("selected", selected), ("shipped defaults", default)):
        for name, (cases, _) in score_fn(cfg).items():
            ins = in_sample(cases)
            best = f"{_f(ins['best_balanced_accuracy'])} @ {_f(ins['best_threshold'])}"
            md.append(f"| {name} | {label} | {_f(ins['roc_auc'])} | {best} |")
    md += length_lines(loaded, score_fn, selected, default, k)
    return {
        "k": k,
        "seed": args.seed,
        "sets": info,
        "full": FULL.key(),
        "selected": {
            "dropped": dropped,
            "options": selected.options.model_dump(mode="json"),
            "exact_match": selected.exact_match,
        },
        "cv": {c: {n: [asdict(r) for r in rs] for n, rs in per_set.items()} for c, per_set in blocks.items()},
        "shared_grounding": {
            c: {n: [asdict(r) for r in rs] for n, rs in per_set.items()} for c, per_set in shared.items()
        },
        "ablation": {
            sw: {"stays": kept, "effects": {n: asdict(e) for n, e in eff.items()}}
            for sw, (eff, kept) in decisions.items()
        },
        "nested_dropped": nested_dropped,
        "markdown": "\n".join(md) + "\n",
    }


#: the names of the shipped defaults' figures in a report (and of what ``--baseline`` reads): with a
#: threshold per set, and with one threshold shared by the grounding sets
DEFAULTS_BLOCK = "shipped defaults (LexicalOptions())"
SHARED_DEFAULTS = "shipped defaults"


def baseline_lines(
    title: str,
    current: Mapping[str, Sequence[FoldResult]],
    baseline: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[str]:
    """The shipped defaults against a baseline run's, fold by fold (this minus baseline)."""
    lines = [
        "",
        f"### Shipped defaults against the baseline, {title} (same folds; change = this run minus it)",
        "",
        "| set | baseline bal.acc | this bal.acc | Δ bal.acc (mean ± sd over folds) | Δ AUC (mean ± sd) | "
        "Δ bal.acc per fold |",
        "|---|---|---|---|---|---|",
    ]
    for name, results in current.items():
        before = baseline.get(name)
        if before is None or len(before) != len(results):
            lines.append(f"| {name} | n/a | {_ms(summarise(results)['balanced_accuracy'])} | n/a | n/a | |")
            continue
        old = [FoldResult(**{f: b[f] for f in ("fold", "n", "threshold", "balanced_accuracy", "roc_auc")})
               for b in before]  # fmt: skip
        change = effect(results, old)
        per_fold = [
            "n/a" if a.balanced_accuracy is None or b.balanced_accuracy is None
            else f"{a.balanced_accuracy - b.balanced_accuracy:+.3f}"
            for a, b in zip(results, old, strict=True)
        ]  # fmt: skip
        was, now = summarise(old)["balanced_accuracy"], summarise(results)["balanced_accuracy"]
        lines.append(
            f"| {name} | {_ms(was)} | {_ms(now)} | {_signed(change.balanced_accuracy)} | "
            f"{_signed(change.roc_auc)} | {', '.join(per_fold)} |"
        )
    return lines


def run_quick(
    args: argparse.Namespace,
    loaded: Mapping[str, tuple[LabeledSet, Path]],
    score_fn: ScoreFn,
    switches: Sequence[str],
    baseline: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]] | None,
) -> dict[str, Any]:
    """The shipped defaults cross-validated, the named switches turned off from them one at a time, and
    (with a baseline) the defaults' change against the baseline's."""
    k = args.k
    names = list(loaded)
    info = {
        n: {"score": d.score, "groups": len(set(d.groups)), "cases": len(d.ids), "label": d.label}
        for n, (d, _) in loaded.items()
    }
    default = Config(LexicalOptions(), True)
    blocks = {DEFAULTS_BLOCK: per_set_cv(score_fn(default), k)}
    shared = {SHARED_DEFAULTS: shared_grounding_cv(score_fn(default), k)}
    decisions = ablate(default, switches, score_fn, k) if switches else {}
    command = " ".join(["python", "benchmarks/accuracy_cv.py", f"--k {k} --seed {args.seed}"])
    md = [f"Made by `{command} --switches {','.join(switches)}` (data: `{args.data}`).", ""]
    md += cv_table(
        f"Out-of-fold, grouped {k}-fold, threshold per set chosen on the training folds", blocks, info
    )
    if baseline is not None:
        md += baseline_lines("threshold per set", blocks[DEFAULTS_BLOCK], baseline["per set"])
        if shared[SHARED_DEFAULTS]:
            title = "one threshold for both grounding sets"
            md += baseline_lines(title, shared[SHARED_DEFAULTS], baseline["shared"])
    if decisions:
        md += ["", "### Out-of-fold change when one switch is off (from the shipped defaults)", ""]
        md += ablation_table(decisions, names)
    md += ["", "### In-sample (threshold chosen on all cases: optimistic)", ""]
    md += ["| set | ROC AUC | best bal.acc @ thr |", "|---|---|---|"]
    for name, (cases, _) in score_fn(default).items():
        ins = in_sample(cases)
        best = f"{_f(ins['best_balanced_accuracy'])} @ {_f(ins['best_threshold'])}"
        md.append(f"| {name} | {_f(ins['roc_auc'])} | {best} |")
    return {
        "k": k,
        "seed": args.seed,
        "sets": info,
        "cv": {c: {n: [asdict(r) for r in rs] for n, rs in per_set.items()} for c, per_set in blocks.items()},
        "shared_grounding": {
            c: {n: [asdict(r) for r in rs] for n, rs in per_set.items()} for c, per_set in shared.items()
        },
        "ablation": {
            sw: {"stays": kept, "effects": {n: asdict(e) for n, e in eff.items()}}
            for sw, (eff, kept) in decisions.items()
        },
        "markdown": "\n".join(md) + "\n",
    }


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def length_lines(
    loaded: Mapping[str, tuple[LabeledSet, Path]],
    score_fn: ScoreFn,
    selected: Config,
    default: Config,
    k: int,
) -> list[str]:
    """Grounding sets: a length-only score (-len(answer)) cross-validated like the judge, and the AUC of
    each within answer-length quintiles (what is left once length is held roughly fixed)."""
    lines = [
        "",
        "### Length check (grounding sets)",
        "",
        "| set | length-only bal.acc (CV) | length-only AUC (CV) | AUC within length quintiles: "
        "length-only / selected / defaults |",
        "|---|---|---|---|",
    ]
    for name, (data, _) in loaded.items():
        if data.label != "grounded":
            continue
        by_length = [-float(n) for n in data.answer_lengths]
        length = Scored(data.labels, by_length, data.folds)
        s = summarise(cross_validate({name: length}, choose_shared_threshold, k)[name])
        strat = [_f(length_stratified_auc(data.labels, by_length, data.answer_lengths))]
        for cfg in (selected, default):
            sc, _ = score_fn(cfg)[name]
            if len(sc.labels) != len(data.labels):  # some cases without a score: lengths do not align
                strat.append("n/a")
                continue
            strat.append(_f(length_stratified_auc(sc.labels, sc.scores, data.answer_lengths)))
        lines.append(
            f"| {name} | {_ms(s['balanced_accuracy'])} | {_ms(s['roc_auc'])} | {' / '.join(strat)} |"
        )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
