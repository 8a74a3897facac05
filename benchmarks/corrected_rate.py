"""The corrected rate measured on known truth: simulated deployments of a known true rate, judged by a
judge of known sensitivity and specificity, with a label budget drawn the way the review queue draws it,
scored by the product's own code (pipeline.metrics.agreement.agreement and corrected_rate, the functions
the worker, the dashboard and ``groundwatch agreement`` call).

Each run: ``--traffic`` interactions, each truly hallucinated with probability pi; the judge flags a
hallucinated one with probability Se and a grounded one with probability 1 - Sp. The review queue draws
a uniform share of the traffic plus a stratum of the flagged interactions (the judge's positives, which
hold most of the rare class), each interaction with a known inclusion probability, until the label budget
is spent; labels are weighted by the inverse of it. Reported per cell (pi, Se, Sp, budget): the share
of runs where the rate could be corrected (enough labels of each class), the coverage of the corrected
rate's 95 % interval among them, its mean width, and the mean absolute error of the corrected and of the
flagged rate.

    .venv/bin/python benchmarks/corrected_rate.py --runs 200         # the grid of docs/accuracy.md
    .venv/bin/python benchmarks/corrected_rate.py --runs 200 --resamples 0      # the delta method alone
    .venv/bin/python benchmarks/corrected_rate.py --runs 100 --turns 5 --review-by-conversation \
        --budgets 200,500                                             # clumped traffic, clumped labels
    .venv/bin/python benchmarks/corrected_rate.py --runs 400 --json out.json

By default interactions are independent. With ``--turns K`` they come in conversations of K turns that
share their truth and the judge's verdict (the judge errs on a whole conversation), and the labels are
grouped by conversation as the product groups them; ``--review-by-conversation`` labels every turn of
a drawn conversation instead of drawing each interaction on its own.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import write_json
from pipeline.metrics.agreement import CorrectionStatus, LabeledCase, agreement, corrected_rate

RATES = (0.02, 0.05, 0.10, 0.30)
QUALITIES = (0.6, 0.8, 0.95)
BUDGETS = (50, 200, 500)


def one_run(
    rng: np.random.Generator,
    pi: float,
    se: float,
    sp: float,
    budget: int,
    traffic: int,
    min_per_class: int,
    turns: int = 1,
    resamples: int = 1000,
    by_conversation: bool = False,
) -> tuple[bool, bool, float, float, float]:
    """(corrected?, covered?, width, |corrected - pi|, |flagged - pi|) of one simulated deployment."""
    conversation = np.arange(traffic) // turns
    n_conv = int(conversation[-1]) + 1
    # a conversation's turns share their truth and the judge's draw (its errors come together)
    truth = (rng.random(n_conv) < pi)[conversation]
    judged = rng.random(n_conv)[conversation]
    flagged = np.where(truth, judged < se, judged >= sp)
    true_rate = float(truth.mean())
    # the queue: a uniform draw at rate u, and the flagged at rate max(u, f); half the budget each way
    n_flagged = max(int(flagged.sum()), 1)
    u = min(1.0, budget / 2 / traffic)
    f = max(u, min(1.0, budget / 2 / n_flagged))
    # the draw: per interaction (the review queue's), or per conversation (a reviewer labels every turn
    # of a conversation drawn, at the probability of its first turn)
    draw = rng.random(n_conv)[conversation] if by_conversation else rng.random(traffic)
    prob = np.where(flagged, f, u)
    if by_conversation:
        prob = prob[conversation * turns]
    picked = np.flatnonzero(draw < prob)
    cases = [
        LabeledCase(str(i), int(conversation[i]), bool(truth[i]), bool(flagged[i]), 1.0 / float(prob[i]))
        for i in picked
    ]
    quality = agreement(cases, resamples=resamples, seed=int(rng.integers(1 << 31)))
    result = corrected_rate(int(flagged.sum()), traffic, quality, min_per_class=min_per_class)
    flag_error = abs(float(flagged.mean()) - true_rate)
    if result.status is not CorrectionStatus.OK or result.corrected is None:
        return False, False, 0.0, 0.0, flag_error
    assert result.low is not None and result.high is not None
    covered = result.low <= true_rate <= result.high
    return True, covered, result.high - result.low, abs(result.corrected - true_rate), flag_error


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300, help="simulated deployments per cell")
    parser.add_argument("--traffic", type=int, default=20_000, help="interactions in a deployment's period")
    parser.add_argument("--min-per-class", type=int, default=10, help="labels.min_per_class")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--turns", type=int, default=1, help="turns a conversation (its turns share truth and judge errors)"
    )
    parser.add_argument("--resamples", type=int, default=1000, help="labels.bootstrap_resamples")
    parser.add_argument(
        "--review-by-conversation",
        action="store_true",
        help="label every turn of a drawn conversation (else each interaction is drawn on its own)",
    )
    parser.add_argument("--budgets", type=str, default=",".join(map(str, BUDGETS)), help="label budgets")
    parser.add_argument("--json", type=Path, help="write every cell as JSON")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cells = []
    print(
        f"{args.runs} runs a cell, {args.traffic:,} interactions a run in conversations of "
        f"{args.turns} turns, "
        f"min_per_class {args.min_per_class}; "
        "coverage of the 95 % interval among runs that could be corrected"
    )
    print(
        f"{'pi':>5} {'Se':>5} {'Sp':>5} {'labels':>6} {'corrected':>9} {'coverage':>8} {'width':>6} "
        f"{'MAE corr':>8} {'MAE flag':>8}"
    )
    budgets = [int(b) for b in args.budgets.split(",")]
    for pi, se, sp, budget in itertools.product(RATES, QUALITIES, QUALITIES, budgets):
        outcomes = [
            one_run(rng, pi, se, sp, budget, args.traffic, args.min_per_class, args.turns, args.resamples)
            for _ in range(args.runs)
        ]
        done = [o for o in outcomes if o[0]]
        cell = {
            "true_rate": pi,
            "sensitivity": se,
            "specificity": sp,
            "labels": budget,
            "runs": args.runs,
            "corrected_share": len(done) / args.runs,
            "coverage": sum(o[1] for o in done) / len(done) if done else None,
            "mean_width": float(np.mean([o[2] for o in done])) if done else None,
            "mae_corrected": float(np.mean([o[3] for o in done])) if done else None,
            "mae_flagged": float(np.mean([o[4] for o in outcomes])),
        }
        cells.append(cell)

        def f(v: float | None, digits: int = 3) -> str:
            return "-" if v is None else f"{v:.{digits}f}"

        print(
            f"{pi:>5.2f} {se:>5.2f} {sp:>5.2f} {budget:>6} {f(cell['corrected_share'], 2):>9} "
            f"{f(cell['coverage']):>8} {f(cell['mean_width']):>6} {f(cell['mae_corrected']):>8} "
            f"{f(cell['mae_flagged']):>8}"
        )
    strong = [c for c in cells if c["sensitivity"] + c["specificity"] >= 1.3 and c["coverage"] is not None]
    worst = min(strong, key=lambda c: c["coverage"]) if strong else None
    if worst:
        print(
            f"cells with Se + Sp >= 1.3: {len(strong)}; lowest coverage {worst['coverage']:.3f} "
            f"(pi {worst['true_rate']}, Se {worst['sensitivity']}, Sp {worst['specificity']}, "
            f"{worst['labels']} labels); below 0.93: {sum(1 for c in strong if c['coverage'] < 0.93)}"
        )
    write_json(args.json, cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
