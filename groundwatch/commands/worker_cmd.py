"""`groundwatch worker`: run the stream processors against the configured Kafka and ClickHouse."""

from __future__ import annotations

import argparse
import asyncio
import logging

from pydantic import SecretStr

from schemas.errors import ConfigError
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


def preflight(settings: Settings) -> None:
    """What would otherwise fail inside faust's start-up with a long traceback, checked first so the
    command ends with one line (groundwatch.cli): the alert rules file, and that ClickHouse opens (an
    embedded chDB path another worker holds is named as such; the engine stays open for this process,
    which the worker's store then reuses)."""
    from streams.alerts.rules import load_rules
    from streams.clickhouse.client import connect, parse_url

    rules = settings.alerts.rules_file
    if rules is not None:
        if not rules.is_file():
            raise ConfigError(f"alert rules file {rules} (GROUNDWATCH_ALERTS__RULES_FILE) does not exist")
        load_rules(rules)  # a bad rule: pydantic ValidationError naming it
    target = parse_url(settings.clickhouse.url.get_secret_value(), settings.clickhouse.database)
    client = connect(target)
    if target.kind != "chdb":  # the embedded engine lives as long as the process
        client.close()


def run(args: argparse.Namespace) -> int:
    from schemas.safe_text import install_safe_logging
    from streams.app import GroundwatchWorker, create_app
    from streams.topics import ensure_topics

    install_safe_logging()  # every record escaped: a message's text can never forge a log line
    settings = settings_from(args)
    preflight(settings)
    logging.basicConfig(level=args.loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.loglevel != "debug":  # httpx logs every judge request at INFO: ~4% of the worker's CPU
        logging.getLogger("httpx").setLevel(logging.WARNING)
    # topics first, with our partition count: the join needs its inputs co-partitioned
    asyncio.run(ensure_topics(settings.kafka))
    stream_app = create_app(settings)
    worker = GroundwatchWorker(stream_app, loglevel=args.loglevel)
    try:
        # returns when the worker stops (SIGINT/SIGTERM); a broker that lost the topics, or a stop that
        # overruns kafka.shutdown_timeout_s, ends the process with one line and exit code 2
        # (streams.lifecycle)
        worker.execute_from_commandline()
    finally:
        stream_app.cleanup()
    return 0


if __name__ == "__main__":  # `python -m groundwatch.commands.worker_cmd`: this command alone
    import sys

    from groundwatch.cli import main

    sys.exit(main(["worker", *sys.argv[1:]]))  # errors end in one line, as with `groundwatch worker`
