"""`groundwatch export`: stored interactions, their labels and this judge's verdicts as eval JSONL."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from groundwatch.store_access import add_clickhouse_argument
from schemas.errors import ConfigError


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", help="only this app")
    parser.add_argument("--model", help="only this model")
    parser.add_argument("--since", default="7d", help="interactions since: 30m, 2h, 7d or an ISO time")
    parser.add_argument("--labeled-only", action="store_true", help="only interactions people labeled")
    parser.add_argument("--worst", type=_positive, help="only the N with the lowest context entailment")
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    add_clickhouse_argument(parser)


def run(args: argparse.Namespace) -> int:
    from groundwatch.store_access import open_store, read_failed, settings_with_clickhouse
    from groundwatch.trend_report import since_range
    from pipeline.export_file import dumps, export_lines
    from streams.clickhouse.labels import LabelStore

    start, end = since_range(args.since)
    if args.out.parent and not args.out.parent.is_dir():
        raise ConfigError(f"--out: no directory {args.out.parent}")
    settings = settings_with_clickhouse(args.clickhouse)
    store = open_store(settings, migrate=False)
    try:
        rows = asyncio.run(
            LabelStore(store).export_rows(
                start, end, app=args.app, model=args.model, labeled_only=args.labeled_only, worst=args.worst
            )
        )
    except Exception as exc:
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    written = labeled = 0
    with args.out.open("w", encoding="utf-8") as out:
        for line in export_lines(rows, settings):
            out.write(dumps(line) + "\n")
            written += 1
            labeled += "labels" in line
    print(f"{args.out}: {written} interactions ({labeled} labeled) from {store.describe()}")
    return 0
