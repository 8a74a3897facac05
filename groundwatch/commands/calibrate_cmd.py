"""`groundwatch calibrate`: the decision thresholds people's labels support, by grouped cross-validation.

Prints, per label kind with a threshold (grounded: the hallucination threshold; correct: the correct
threshold), the out-of-fold balanced accuracy at today's setting (the app/model's own threshold when
``pipeline.app_thresholds`` has one) and with a threshold chosen on the other folds, and the setting to
apply: ``GROUNDWATCH_PIPELINE__APP_THRESHOLDS`` with this app's (or model's) thresholds, the others kept.
Where the labeled interactions were judged by the cascade, the cascade's band too. Nothing changes by
itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING

from groundwatch.figures import UNDEFINED, defined, fixed, json_safe
from groundwatch.store_access import add_clickhouse_argument
from schemas.errors import ConfigError

if TYPE_CHECKING:
    from pipeline.calibration import Calibration
    from schemas.label import LabeledRow
    from schemas.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", required=True, help="the app whose labels choose the thresholds")
    parser.add_argument("--model", help="only this model's interactions")
    parser.add_argument("--since", default="90d", help="labeled interactions since: 7d, 30d or an ISO time")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_clickhouse_argument(parser)


def _fmt(mean: float | None, sd: float | None) -> str:
    """An out-of-fold mean and its spread (``-`` when undefined; a spread of one fold is 0)."""
    if defined(mean) is None:
        return UNDEFINED
    return f"{fixed(mean)} ± {fixed(0.0 if sd is None else sd)}"


def run(args: argparse.Namespace) -> int:
    from groundwatch.store_access import settings_with_clickhouse
    from pipeline.calibration import APP_THRESHOLDS, SCORE_OF, app_thresholds_with, calibrate

    settings = settings_with_clickhouse(args.clickhouse)
    rows = _labeled_rows(args, settings)
    judges = sorted({r.judge for r in rows})
    if len(judges) > 1:
        raise ConfigError(
            f"{args.app}'s labeled interactions were judged by {', '.join(judges)}: pass --since"
        )
    results = []
    for kind, (score, _) in SCORE_OF.items():
        current = settings.pipeline.threshold_for(score, judges[0], args.app, args.model)
        results.append(calibrate(rows, kind, current, cascade=judges[0] == "cascade"))
    proposals: dict[str, float] = {
        r.key: r.proposed_threshold for r in results if r.proposed_threshold is not None
    }
    existing = {
        app: value.model_dump(exclude_defaults=True)
        for app, value in settings.pipeline.app_thresholds.items()
    }
    setting = (
        json.dumps(app_thresholds_with(existing, args.app, args.model, proposals)) if proposals else None
    )
    if args.json:
        calibrations = [json_safe(r.model_dump(mode="json")) for r in results]
        print(json.dumps({"calibrations": calibrations, "apply": setting}))
        return 0
    scope = f"{args.app}" + (f" / {args.model}" if args.model else "")
    print(f"Thresholds for {scope} (judge {judges[0]}), grouped cross-validation on people's labels "
          "(out-of-fold balanced accuracy, mean ± sd over folds):")  # fmt: skip
    for r in results:
        _print_calibration(r)
    if setting is None:
        print("\nNothing to propose yet: label more interactions.")
        return 0
    print(
        f"\nTo apply on the worker (this {'model' if args.model else 'app'}'s thresholds; the others "
        f"kept):\n  {APP_THRESHOLDS}='{setting}'"
    )
    if any(r.cascade_band for r in results):
        print("The cascade's band applies to every app the worker judges.")
    print("Nothing was changed.")
    return 0


def _labeled_rows(args: argparse.Namespace, settings: Settings) -> list[LabeledRow]:
    """The app's (and model's) labeled, judged interactions since ``--since``; end users' labels only
    when ``labels.include_end_user``. ConfigError when there are none."""
    from groundwatch.store_access import open_store, read_failed
    from groundwatch.trend_report import since_range
    from schemas.label import LabelSource
    from streams.clickhouse.labels import LabelStore

    start, end = since_range(args.since)
    store = open_store(settings, migrate=False)
    try:
        rows = asyncio.run(LabelStore(store).labeled_rows(start, end, args.app, args.model))
    except Exception as exc:
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    if not settings.labels.include_end_user:
        rows = [r for r in rows if r.source is not LabelSource.END_USER]
    if not rows:
        raise ConfigError(f"no labels of {args.app}'s judged interactions since {start:%Y-%m-%d}")
    return list(rows)


def _print_calibration(r: Calibration) -> None:
    """One label kind's calibration, in words."""
    print(
        f"\n{r.kind.value} ({r.score}): {r.cases} labeled cases, {r.positives} positive, "
        f"{r.groups} groups" + (f", {r.folds} folds" if r.folds >= 2 else "")
    )
    if r.current_balanced_accuracy is not None:
        print(
            f"  today's threshold {r.current_threshold:.3f}: "
            f"{_fmt(r.current_balanced_accuracy, r.current_sd)}"
        )
    if r.proposed_threshold is None:
        print(f"  {r.note}")
        return
    folds = ", ".join(f"{t:.3f}" for t in r.fold_thresholds)
    print(f"  chosen in the training folds ({folds}): "
          f"{_fmt(r.cross_validated_balanced_accuracy, r.cross_validated_sd)}")  # fmt: skip
    print(f"  proposed (chosen on every case, in-sample): {r.key} {r.proposed_threshold:.3f}")
    band = r.cascade_band
    if band is not None:
        print(
            f"  cascade band [{band.low:.3f}, {band.high:.3f}]: {band.errors_inside} of the "
            f"{band.errors} cases the proposed threshold gets wrong, {100 * band.share_inside:.0f} % of "
            f"the labeled cases sent to the LLM: {band.settings[0]}={band.low:.3f} "
            f"{band.settings[1]}={band.high:.3f}"
        )
