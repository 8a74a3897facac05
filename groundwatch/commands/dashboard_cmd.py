"""`groundwatch dashboard`: serve the built-in dashboard over a ClickHouse server or a chDB path.

With chDB, the path must not be held by a running worker (one process per path): a worker serves the
same dashboard itself at http://127.0.0.1:<web_port>/dashboard/ (GROUNDWATCH_KAFKA__WEB_ENABLED=true).
"""

from __future__ import annotations

import argparse
import asyncio

from schemas.errors import ConfigError
from schemas.settings import ClickHouseSettings, DashboardSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clickhouse",
        help="ClickHouse URL (chdb:///path or http(s)://host:port/db); default GROUNDWATCH_CLICKHOUSE__URL. "
        "Pass a URL with a password through the environment, not the command line",
    )
    parser.add_argument(
        "--bind",
        default=None,
        help="HOST:PORT to listen on (default GROUNDWATCH_DASHBOARD__HOST:8050, i.e. 127.0.0.1:8050); any "
        "host but loopback needs GROUNDWATCH_DASHBOARD__TOKEN or __USERNAME/__PASSWORD",
    )


def parse_bind(bind: str | None, default_host: str) -> tuple[str, int]:
    if not bind:
        return default_host, 8050
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--bind must be HOST:PORT with a port 1-65535, got {bind!r}")
    return host.strip("[]") or default_host, int(port)


async def serve(clickhouse: ClickHouseSettings, dashboard: DashboardSettings, host: str, port: int) -> None:
    from aiohttp import web

    from streams.clickhouse.store import ClickHouseStore
    from streams.dashboard.api import root_app
    from streams.dashboard.edges import EdgeRunner

    store = await ClickHouseStore.open(clickhouse, migrate=True)
    runner = EdgeRunner(root_app(lambda: store, dashboard), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    shown = f"[{host}]" if ":" in host else host
    print(f"groundwatch dashboard on http://{shown}:{port}/dashboard/ ({store.describe()}); Ctrl-C stops it",
          flush=True)  # fmt: skip
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await store.aclose()


def run(args: argparse.Namespace) -> int:
    from groundwatch.store_access import settings_with_clickhouse
    from streams.dashboard.auth import require_credentials

    settings = settings_with_clickhouse(args.clickhouse)  # with the evaluators' custom.<name> metrics
    clickhouse = settings.clickhouse
    host, port = parse_bind(args.bind, settings.dashboard.host)
    require_credentials(host, settings.dashboard)  # DashboardConfigError naming what is missing
    try:
        asyncio.run(serve(clickhouse, settings.dashboard, host, port))
    except KeyboardInterrupt:
        pass
    return 0
