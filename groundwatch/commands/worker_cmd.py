"""`groundwatch worker`: run the stream processors against the configured Kafka and ClickHouse."""

from __future__ import annotations

import argparse
import asyncio
import logging

from pydantic import SecretStr

from schemas.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loglevel", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--broker", help="override GROUNDWATCH_KAFKA__BROKER (kafka://host:port)")
    parser.add_argument(
        "--clickhouse",
        help="override GROUNDWATCH_CLICKHOUSE__URL (chdb:///path or http(s)://); pass a URL with a "
        "password through the environment, not the command line (other users can read a process's "
        "arguments)",
    )
    parser.add_argument("--judge", choices=["openai", "local", "lexical", "cascade"], help="judge kind")
    parser.add_argument("--web-port", type=int, help="faust web port on 127.0.0.1")


def settings_from(args: argparse.Namespace) -> Settings:
    kafka: dict[str, object] = {}
    if args.broker:
        kafka["broker"] = args.broker
    if args.web_port is not None:
        kafka["web_port"] = args.web_port
    changes: dict[str, dict[str, object]] = {"kafka": kafka}
    if args.clickhouse:
        changes["clickhouse"] = {"url": SecretStr(args.clickhouse)}
    if args.judge:
        changes["judge"] = {"kind": args.judge}
    return Settings().with_changes(**changes)


def run(args: argparse.Namespace) -> int:
    import faust

    from schemas.safe_text import install_safe_logging
    from streams.app import create_app
    from streams.topics import ensure_topics

    install_safe_logging()  # every record escaped: a message's text can never forge a log line
    settings = settings_from(args)
    logging.basicConfig(level=args.loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.loglevel != "debug":  # httpx logs every judge request at INFO: ~4% of the worker's CPU
        logging.getLogger("httpx").setLevel(logging.WARNING)
    # topics first, with our partition count: the join needs its inputs co-partitioned
    asyncio.run(ensure_topics(settings.kafka))
    stream_app = create_app(settings)
    worker = faust.Worker(stream_app.app, stream_app.resources, loglevel=args.loglevel)
    try:
        worker.execute_from_commandline()  # returns when the worker stops (SIGINT/SIGTERM)
    finally:
        stream_app.cleanup()
    return 0


if __name__ == "__main__":  # `python -m groundwatch.commands.worker_cmd`: this command alone
    import sys

    _parser = argparse.ArgumentParser(prog="groundwatch worker", description=__doc__)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
