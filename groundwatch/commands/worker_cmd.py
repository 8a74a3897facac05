"""`groundwatch worker`: run the stream processors against the configured Kafka and ClickHouse."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from groundwatch.commands.arg_types import port_number
from schemas.errors import ConfigError
from schemas.settings import KafkaSettings, Settings, variable_name

if TYPE_CHECKING:
    from streams.processes import JudgingProcesses


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
    parser.add_argument(
        "--web-port",
        type=port_number,
        help="serve the worker's web server (the dashboard at /dashboard/, /metrics, /healthz) on this port "
        "of GROUNDWATCH_DASHBOARD__HOST (127.0.0.1 by default): GROUNDWATCH_KAFKA__WEB_ENABLED=true and "
        "__WEB_PORT",
    )
    # a judging process of a worker (streams.processes), started by that worker: not for people
    parser.add_argument("--judging-for", type=int, metavar="PID", help=argparse.SUPPRESS)


def settings_from(args: argparse.Namespace) -> Settings:
    kafka: dict[str, object] = {}
    if args.broker:
        kafka["broker"] = args.broker
    if args.web_port is not None:
        kafka.update(web_port=args.web_port, web_enabled=True)
    changes: dict[str, dict[str, object]] = {"kafka": kafka}
    if args.clickhouse:
        changes["clickhouse"] = {"url": SecretStr(args.clickhouse)}
    if args.judge:
        changes["judge"] = {"kind": args.judge}
    return Settings().with_changes(**changes)


def read_files(settings: Settings) -> None:
    """Every file the worker reads, read and validated before it connects to anything: a missing or bad
    one is a ConfigError naming the file and its setting."""
    from pipeline.custom_evaluators import load_evaluators
    from pipeline.sampling import load_sampling_rules
    from streams.alerts.rules import load_rules

    files: list[tuple[Path | None, Callable[[Path], object], str]] = [
        # first: its custom.<name> metrics join the catalogue the alert rules are checked against
        (settings.evaluators.file, load_evaluators, variable_name("evaluators", "file")),
        (settings.alerts.rules_file, load_rules, variable_name("alerts", "rules_file")),
        (settings.sampling.rules_file, load_sampling_rules, variable_name("sampling", "rules_file")),
    ]
    for path, load, variable in files:
        if path is not None:
            try:
                load(path)
            except ConfigError as exc:
                raise ConfigError(f"{exc} ({variable})") from None
    if settings.alerts.rules_file is not None:
        from streams.alerts.slices import check_group_by

        check_group_by(load_rules(settings.alerts.rules_file), settings.dimensions)


def preflight(settings: Settings) -> None:
    """What would otherwise fail inside faust's start-up with a long traceback, checked first so the
    command ends with one line (groundwatch.cli): the files the worker reads, that its web server may
    bind where it is told (off loopback only with credentials, on a port no other process holds), then
    that ClickHouse opens (an embedded chDB path another worker holds is named as such; the engine stays
    open for this process, which the worker's store then reuses). Nothing here touches the broker:
    ``run`` builds the app (the rest of its checks) before it creates anything there
    (``prepare_broker``)."""
    from streams.clickhouse.client import connect, parse_url
    from streams.dashboard.auth import require_credentials

    read_files(settings)
    if settings.kafka.web_enabled:
        require_credentials(settings.dashboard.host, settings.dashboard)
        require_bindable(settings.dashboard.host, settings.kafka.web_port)
    target = parse_url(settings.clickhouse.url.get_secret_value(), settings.clickhouse.database)
    client = connect(target)
    if target.kind != "chdb":  # the embedded engine lives as long as the process
        client.close()


def require_bindable(host: str, port: int) -> None:
    """That the web server can listen on ``host``:``port`` (each address the host names), as asyncio's
    server binds (``SO_REUSEADDR``: a port left in TIME_WAIT is free); the sockets are closed at once.
    Another process holding the port would otherwise stop the worker only once it has started, with a
    traceback. A ConfigError naming the address and the settings."""
    import errno
    import socket

    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    settings_named = f"{variable_name('kafka', 'web_port')}, {variable_name('dashboard', 'host')}"
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in addresses:
            try:
                with socket.socket(family, kind, proto) as probe:
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    if family == socket.AF_INET6:
                        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    probe.bind(address)
            except OSError as exc:
                unsupported = (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT)
                if family == socket.AF_INET6 and len(addresses) > 1 and exc.errno in unsupported:
                    continue  # a host without IPv6: the server listens on its other addresses
                raise
    except OSError as exc:
        raise ConfigError(
            f"the worker's web server cannot listen on {where}: {exc.strerror or exc} ({settings_named})"
        ) from None


def reach_broker(settings: Settings) -> None:
    """That the broker answers (BrokerUnavailable naming it), creating the topics and a new group's start
    offsets there: after every other check passed."""
    from streams.topics import broker_errors

    with broker_errors(settings.kafka, "reach"):
        asyncio.run(prepare_broker(settings.kafka))


async def prepare_broker(kafka: KafkaSettings) -> None:
    """Topics first, with our partition count (the join needs its inputs co-partitioned), then where a
    new consumer group starts reading (kafka.start_offset, streams.offsets)."""
    from streams.offsets import apply_start_offset
    from streams.topics import ensure_topics

    await ensure_topics(kafka)
    await apply_start_offset(kafka)


def run(args: argparse.Namespace) -> int:
    from schemas.safe_text import install_safe_logging
    from streams.app import GroundwatchWorker, create_app

    install_safe_logging()  # every record escaped: a message's text can never forge a log line
    settings = settings_from(args)
    logging.basicConfig(level=args.loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.loglevel != "debug":  # httpx logs every judge request at INFO: ~4% of the worker's CPU
        logging.getLogger("httpx").setLevel(logging.WARNING)
    judging_only = args.judging_for is not None
    if judging_only:
        read_files(settings)  # neither ClickHouse nor the web server: the worker that started it has them
    else:
        preflight(settings)
    # settings checked while building it: still nothing on the broker
    stream_app = create_app(settings, judging_only=judging_only)
    judging = None
    try:
        if judging_only:
            from streams.processes import watch_parent

            watch_parent(args.judging_for)  # the broker and its topics are the worker's to prepare
        else:
            reach_broker(settings)
            judging = start_judging_processes(settings, args.loglevel)
        worker = GroundwatchWorker(stream_app, loglevel=args.loglevel)
        # returns when the worker stops (SIGINT/SIGTERM); a broker that lost the topics, or a stop that
        # overruns kafka.shutdown_timeout_s, ends the process with one line and exit code 2
        # (streams.lifecycle)
        worker.execute_from_commandline()
    finally:
        if judging is not None:
            judging.stop()
        stream_app.cleanup()
    return 0


def start_judging_processes(settings: Settings, loglevel: str) -> JudgingProcesses | None:
    """The worker's other judging processes (``kafka.processes``, streams.processes), None when it
    judges alone."""
    from streams.cores import judging_processes
    from streams.processes import JudgingProcesses

    processes = judging_processes(settings)
    if processes <= 1:
        return None
    count = processes - 1  # this process writes ClickHouse, closes windows and serves the web server
    if settings.sampling.rules_file is not None and count > 1:
        logging.getLogger(__name__).warning(
            "judge budgets (%s) are kept per judging process: with %d an app may spend up to %d times its "
            "budget; set %s=2 to keep it exactly",
            variable_name("sampling", "rules_file"), count, count, variable_name("kafka", "processes"),
        )  # fmt: skip
    judging = JudgingProcesses(count, loglevel, stop_timeout_s=settings.kafka.shutdown_timeout_s)
    judging.start()
    return judging


if __name__ == "__main__":  # `python -m groundwatch.commands.worker_cmd`: this command alone
    import sys

    from groundwatch.cli import main

    sys.exit(main(["worker", *sys.argv[1:]]))  # errors end in one line, as with `groundwatch worker`
