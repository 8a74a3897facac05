"""Alert rules measured on known truth: simulated hourly windows of a known hallucination rate, judged by
the product's own rule code (streams.alerts.lifecycle.decide, the function the worker calls).

- stationary: base rates 2 %, 10 %, 30 % with 20-500 judged interactions a window; false alerts (firings)
  per 30 days of 1-hour windows, after the baseline has filled;
- step drifts of +3, +5, +10 points at each base rate; windows from the onset until the alert fires
  (1 = the first drifted window), the share caught within 3 windows, and the share never caught in 48.

    .venv/bin/python benchmarks/alerts.py        # the rules of deploy/alerts/rules.example.yaml
    .venv/bin/python benchmarks/alerts.py --rules my_rules.yaml --runs 50 --json out.json

Every window is a binomial draw (independent interactions, the same rate all month): real traffic
varies more from hour to hour (topics, users), so expect more false alerts in production than here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import write_json
from schemas.alert import Alert, AlertRule, BaselineRule
from streams.alerts.lifecycle import Slot, decide, history_needed
from streams.alerts.rules import load_rules
from streams.alerts.stats import Obs

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "alerts" / "rules.example.yaml"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAYS = 30
BASES = (0.02, 0.10, 0.30)
SUPPORTS = (20, 50, 200, 500)
STEPS = (0.03, 0.05, 0.10)
HORIZON = 48  # windows after the onset before a drift counts as missed


def simulate(
    rule: AlertRule | BaselineRule, rates: list[float], n: int, rng: np.random.Generator
) -> list[Alert]:
    """Run the rule's lifecycle over windows with these true rates and n judged interactions each."""
    need = history_needed(rule)
    slots: list[Slot] = []
    open_alert: Alert | None = None
    last_fired: datetime | None = None
    made = []
    for i, rate in enumerate(rates):
        start = T0 + i * HOUR
        slots.append(Slot(start, start + HOUR, Obs(float(rng.binomial(n, rate)), n)))
        alert = decide(rule, "sim", "m", slots[-need:], open_alert, last_fired, start + HOUR)
        if alert is None:
            continue
        made.append(alert)
        open_alert = alert if alert.state == "firing" else None
        if alert.state == "firing":
            last_fired = alert.window_end
    return made


def warmup(rule: AlertRule | BaselineRule) -> int:
    return history_needed(rule)


def false_alerts(rule: AlertRule | BaselineRule, base: float, n: int, runs: int, seed: int) -> float:
    """Firings per 30 days of 1-hour windows on a stationary stream (after the warm-up)."""
    rng = np.random.default_rng(seed)
    w = warmup(rule)
    counts = []
    for _ in range(runs):
        alerts = simulate(rule, [base] * (w + DAYS * 24), n, rng)
        counts.append(sum(1 for a in alerts if a.state == "firing" and a.window_end > T0 + w * HOUR))
    return statistics.fmean(counts)


def detection(
    rule: AlertRule | BaselineRule, base: float, step: float, n: int, runs: int, seed: int
) -> dict[str, float]:
    """Windows from the onset to the firing (1 = the first drifted window), over runs."""
    rng = np.random.default_rng(seed)
    w = warmup(rule)
    onset = T0 + w * HOUR
    delays = []
    for _ in range(runs):
        alerts = simulate(rule, [base] * w + [min(base + step, 1.0)] * HORIZON, n, rng)
        fired = [a for a in alerts if a.state == "firing" and a.window_end > onset]
        delays.append((fired[0].window_end - onset) / HOUR if fired else float("inf"))
    caught = [d for d in delays if d != float("inf")]
    return {
        "median_windows": statistics.median(delays) if len(caught) * 2 > len(delays) else float("inf"),
        "within_3": sum(d <= 3 for d in delays) / len(delays),
        "missed": 1 - len(caught) / len(delays),
    }


def measure(rule: AlertRule | BaselineRule, runs: int, seed: int) -> dict[str, object]:
    stationary = [
        {"base": b, "n": n, "false_alerts_per_30d": false_alerts(rule, b, n, runs, seed)}
        for b in BASES
        for n in SUPPORTS
    ]
    drift = [
        {"base": b, "step": s, "n": n, **detection(rule, b, s, n, runs * 10, seed)}
        for b in BASES
        for s in STEPS
        for n in (50, 200, 500)
    ]
    return {"rule": rule.model_dump(mode="json", by_alias=True), "stationary": stationary, "drift": drift}


def table(result: dict[str, object]) -> str:
    lines = [
        f"rule: {json.dumps(result['rule'])}",
        "",
        "stationary: false alerts per 30 days (1-hour windows)",
        "",
    ]
    lines += ["| base rate | " + " | ".join(f"{n}/window" for n in SUPPORTS) + " |"]
    lines += ["|---" * (len(SUPPORTS) + 1) + "|"]
    rows = result["stationary"]
    assert isinstance(rows, list)
    for b in BASES:
        cells = [f"{r['false_alerts_per_30d']:.2f}" for r in rows if r["base"] == b]
        lines.append(f"| {b:.0%} | " + " | ".join(cells) + " |")
    lines += ["", "step drift: median windows to the alert / caught within 3 windows (missed in 48)", ""]
    lines += ["| base rate | step | 50/window | 200/window | 500/window |", "|---|---|---|---|---|"]
    drift = result["drift"]
    assert isinstance(drift, list)
    for b in BASES:
        for s in STEPS:
            cells = [
                f"{r['median_windows']:g} / {r['within_3']:.0%}"
                + (f" ({r['missed']:.0%})" if r["missed"] else "")
                for r in drift
                if r["base"] == b and r["step"] == s
            ]
            lines.append(f"| {b:.0%} | +{s * 100:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rules", type=Path, default=RULES)
    parser.add_argument("--rule", help="the rule's name (default: every hallucination_rate rule)")
    parser.add_argument("--runs", type=int, default=20, help="30-day runs per stationary case (x10 drifts)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    rules = [
        r
        for r in load_rules(args.rules).rules
        if (r.name == args.rule if args.rule else r.metric == "hallucination_rate")
    ]
    results = [measure(r, args.runs, args.seed) for r in rules]
    print("\n\n".join(table(r) for r in results))
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
