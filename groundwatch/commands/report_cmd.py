"""`groundwatch report`: trend tables per app/model from ClickHouse (window_aggregates + alerts)."""

from __future__ import annotations

import argparse
import logging

from pydantic import SecretStr

from schemas.errors import ClickHouseUnavailable, ConfigError, GroundwatchError
from schemas.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help="only windows since: 30m, 2h, 7d or an ISO time (default: all)")
    parser.add_argument("--app", help="only this app")
    parser.add_argument("--model", help="only this model")
    parser.add_argument("--json", action="store_true", help="print JSON (counts, windows, alerts)")
    parser.add_argument(
        "--clickhouse",
        help="override GROUNDWATCH_CLICKHOUSE__URL (chdb:///path); pass a URL with a password through the "
        "environment, not the command line (other users can read a process's arguments)",
    )


def run(args: argparse.Namespace) -> int:
    from groundwatch.trend_report import Report, parse_since, render
    from streams.clickhouse.client import parse_url
    from streams.clickhouse.store import ClickHouseStore

    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)  # its errors: one line, below
    settings = Settings()
    if args.clickhouse:
        settings = settings.with_changes(clickhouse={"url": SecretStr(args.clickhouse)})
    try:
        since = parse_since(args.since)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    url = settings.clickhouse.url.get_secret_value()
    where = parse_url(url, settings.clickhouse.database).describe()  # without the password (ConfigError)
    try:
        store = ClickHouseStore.open_sync(settings.clickhouse, migrate=False)  # read-only: no DDL
    except GroundwatchError as exc:  # a chDB path another process holds, a server that does not answer
        raise ClickHouseUnavailable(f"cannot open ClickHouse at {where}: {exc}") from None
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
        why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise ClickHouseUnavailable(
            f"cannot read the groundwatch tables at {where} (has a worker run on it?): {why}"
        ) from None
    finally:
        store.close()
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":  # `python -m groundwatch.commands.report_cmd`: this command alone
    import sys

    from groundwatch.cli import main

    sys.exit(main(["report", *sys.argv[1:]]))  # errors end in one line, as with `groundwatch report`
