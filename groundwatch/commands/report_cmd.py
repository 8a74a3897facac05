"""`groundwatch report`: trend tables per app/model from ClickHouse (window_aggregates + alerts); with
``--by DIMENSION``, a metric per slice of that dimension and, with ``--compare-to``, what changed
(groundwatch/slice_report.py)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from groundwatch.store_access import add_clickhouse_argument
from schemas.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help="only windows since: 30m, 2h, 7d or an ISO time (default: all)")
    parser.add_argument("--app", help="only this app")
    parser.add_argument("--model", help="only this model")
    parser.add_argument("--json", action="store_true", help="print JSON (counts, windows, alerts)")
    parser.add_argument(
        "--by",
        metavar="DIMENSION",
        help="a metric per slice of this dimension (prompt_version, retriever, answer_length, ...) over "
        "--since (default 7d) instead of the trend tables",
    )
    parser.add_argument(
        "--compare-to",
        metavar="AGO",
        help="with --by: what changed since the same period this long before (7d, 24h), each slice's "
        "contribution split into mix and rate shift",
    )
    parser.add_argument("--metric", help="with --by: the metric (default hallucination_rate)")
    parser.add_argument(
        "--documents",
        action="store_true",
        help="per context document, worst first: retrievals and the share of answer statements judged "
        "against it that were unsupported or contradicted (the last 400 days at most)",
    )
    add_clickhouse_argument(parser)


def run(args: argparse.Namespace) -> int:
    from groundwatch.store_access import open_store, read_failed, settings_with_clickhouse
    from groundwatch.trend_report import Report, parse_since, render

    settings = settings_with_clickhouse(args.clickhouse)
    if args.documents and (args.by is not None or args.compare_to is not None):
        raise ConfigError("--documents ranks documents; it does not go with --by or --compare-to")
    if args.metric is not None and args.by is None:
        raise ConfigError("--metric goes with --by DIMENSION")
    if args.by is not None or args.compare_to is not None:
        from groundwatch.slice_report import run_by

        return run_by(args, settings)
    since = parse_since(args.since)
    store = open_store(settings, migrate=False)  # read-only: no DDL
    if args.documents:
        return _documents(args, store, settings, since)
    try:
        windows = [
            w
            for w in store.windows_sync(since)
            if (args.app is None or w.app == args.app) and (args.model is None or w.model == args.model)
        ]
        alerts = [
            a
            for a in store.alerts_sync(since)
            if (args.app is None or a.app == args.app) and (args.model is None or a.model == args.model)
        ]
        report = Report(counts=store.counts_sync(), windows=windows, alerts=alerts)
    except Exception as exc:  # read-only: a database the worker never set up has no tables
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return 0


def _documents(args: argparse.Namespace, store: Any, settings: Any, since: datetime | None) -> int:
    import asyncio

    from groundwatch.store_access import read_failed
    from schemas.dashboard import MAX_RANGE
    from schemas.documents import DocumentsQuery
    from streams.dashboard.documents import read_documents, render_documents

    end = datetime.now(UTC) + timedelta(hours=1)
    start = max(since, end - MAX_RANGE) if since else end - MAX_RANGE
    terms = [f"{k}:{v}" for k, v in (("app", args.app), ("model", args.model)) if v]
    try:
        query = DocumentsQuery(start=start, end=end, slice=terms, limit=5000)
    except ValueError as exc:
        raise ConfigError(f"--app/--model: {exc}") from None
    try:
        report = asyncio.run(read_documents(store, query))
    except Exception as exc:  # read-only: a database the worker never set up has no tables
        raise read_failed(settings, exc) from None
    finally:
        store.close()
    print(report.model_dump_json(indent=2) if args.json else render_documents(report))
    return 0


if __name__ == "__main__":  # `python -m groundwatch.commands.report_cmd`: this command alone
    import sys

    from groundwatch.cli import main

    sys.exit(main(["report", *sys.argv[1:]]))  # errors end in one line, as with `groundwatch report`
