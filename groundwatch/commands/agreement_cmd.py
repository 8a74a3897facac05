"""`groundwatch agreement`: how often the judge agrees with people's labels, and the corrected rates."""

from __future__ import annotations

import argparse
import asyncio

from groundwatch.store_access import add_clickhouse_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", help="only this app")
    parser.add_argument("--model", help="only this model")
    parser.add_argument(
        "--since", default="30d", help="interactions since: 30m, 2h, 7d or an ISO time (default 30d)"
    )
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    add_clickhouse_argument(parser)


def run(args: argparse.Namespace) -> int:
    from groundwatch.agreement_report import render
    from groundwatch.store_access import open_store, read_failed, settings_with_clickhouse
    from groundwatch.trend_report import since_range
    from streams.clickhouse.labels import LabelStore
    from streams.judge_quality import read_quality

    start, end = since_range(args.since)
    settings = settings_with_clickhouse(args.clickhouse)
    store = open_store(settings, migrate=False)
    try:
        report = asyncio.run(read_quality(LabelStore(store), settings, start, end, args.app, args.model))
    except Exception as exc:
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return 0
