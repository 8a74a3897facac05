"""The faust app, built by a factory from Settings: ``create_app`` returns a fresh app and its resources
service (no module-level app).

Topology (all topics under ``kafka.topic_prefix``, keyed by interaction_id but for ``touches``, same
partition count; docs/architecture.md draws it with the processors' names):

    otlp, otlp_logs -> [otlp] -> interactions (kafka.otlp_input, kafka.otlp_logs_input)
    interactions -> [evaluate] -> evaluations     (kafka.topology "fused", the default: every stage in one;
                                                   in judging processes of their own, streams.processes)
    interactions -> [convert] -> converted -> [judge] -> judged -+-> [join] -> evaluations ("staged")
                                          \\-------------------------/ (the Converted, for the join)
    evaluations -> [sink] -> ClickHouse, touches (keyed by (app, model) and (app, model, conversation_id))
    touches -> [touches] -> the owner's closers (the sink's timer closes them, streams.ownership):
                            windows -> window_aggregates, alerts; conversations -> conversations
    labels -> [labels] -> ClickHouse labels   (people's labels, schemas/label.py)
    deadletter -> [dead_letters] -> ClickHouse dead_letters
    any stage: invalid message / judge error -> deadletter

Delivery is at-least-once: no exactly_once / transactions / idempotent producer (Tansu, the embedded
broker, has none); every ClickHouse write is idempotent (ReplacingMergeTree), events are acked in offset
order after their outputs are sent or written (streams.acks, streams.join).

Stopping (streams.lifecycle): a broker that lost the topics makes the worker end with one line, a
BrokerUnavailable, and exit code 2 (for its supervisor to start it again); every stop is bounded by
``kafka.shutdown_timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import faust

from schemas.errors import BrokerUnavailable
from schemas.settings import Settings
from streams.context import StreamContext, new_context
from streams.cores import judging_processes
from streams.dashboard.api import dashboard_app
from streams.dashboard.auth import auth_middleware, is_loopback, require_credentials
from streams.dashboard.edges import EdgeRunner
from streams.fetch import use_fetch_wait
from streams.heap import settle_heap
from streams.kafka_auth import faust_credentials
from streams.lifecycle import BrokerWatch, ShutdownDeadline, end_process, exit_line
from streams.otlp_http import add_otlp_routes
from streams.probes import add_probe_routes
from streams.processors.convert import ConvertProcessor
from streams.processors.dead_letters import DeadLetterRecorder
from streams.processors.evaluate import EvaluateProcessor
from streams.processors.join import JoinProcessor
from streams.processors.judge import JudgeProcessor
from streams.processors.labels import LabelsProcessor
from streams.processors.otlp import OtlpProcessor
from streams.processors.sink import SinkProcessor
from streams.processors.touches import TouchesProcessor
from streams.resources import Resources
from streams.telemetry import faust_lag

log = logging.getLogger(__name__)


class Registrable(Protocol):
    """A processor: registers its faust agent (and timers) on the app."""

    def register(self) -> Any: ...


@dataclass
class StreamApp:
    app: faust.App
    ctx: StreamContext
    resources: Resources
    datadir: Path
    temporary_datadir: bool  # created for this app: remove it when the worker is done
    watch: BrokerWatch | None = None
    deadline: ShutdownDeadline | None = None
    fatal: BrokerUnavailable | None = None  # why the worker ended itself

    def cleanup(self) -> None:
        if self.temporary_datadir:
            shutil.rmtree(self.datadir, ignore_errors=True)

    async def lose_broker(self, error: BrokerUnavailable) -> None:
        """The broker lost our topics: write what the sink holds (best effort: its source events are
        gone with the topics), then end the process with one line and exit code 2 (streams.lifecycle)."""
        self.fatal = error
        if self.resources.ready:
            try:
                await asyncio.wait_for(self.resources.sink.flush(), timeout=10.0)
            except Exception as exc:
                log.error("could not write the sink's rows before stopping: %r", exc)
        self.cleanup()
        end_process(exit_line(type(error).__name__, str(error)))


class GroundwatchWorker(faust.Worker):
    """faust's worker with the app's resources and broker watch; every stop is bounded by
    ``kafka.shutdown_timeout_s`` (streams.lifecycle.ShutdownDeadline)."""

    def __init__(self, stream_app: StreamApp, **kwargs: Any) -> None:
        services = [s for s in (stream_app.resources, stream_app.watch) if s is not None]
        super().__init__(stream_app.app, *services, **kwargs)
        self.stream_app = stream_app
        self.deadline = stream_app.deadline

    @property
    def shortlabel(self) -> str:
        return "Worker"  # its log lines read "[^Worker]: Ready" as faust's own (groundwatch.local.supervise)

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        frozen = settle_heap()  # start-up is done: its objects out of the collector's sight (streams.heap)
        log.info("start-up done: %d objects frozen out of garbage collection", frozen)

    async def stop(self) -> None:
        if self.deadline is not None:
            self.deadline.arm()
        resources = self.stream_app.resources
        # first, in case the stop cannot end (the final flush comes after faust's commit)
        if resources.ready and not resources.judging_only:
            try:
                await asyncio.wait_for(resources.sink.flush(), timeout=10.0)
            except Exception as exc:  # the rows stay unacked: read again at the next start
                log.warning("flushing the sink as the stop began failed: %r", exc)
        await super().stop()


def faust_app(settings: Settings, datadir: Path) -> faust.App:
    k = settings.kafka
    return faust.App(
        k.consumer_group,
        broker=k.broker,
        broker_credentials=faust_credentials(k),
        autodiscover=False,
        datadir=str(datadir),
        store="memory://",
        key_serializer="raw",
        value_serializer="raw",
        processing_guarantee="at_least_once",
        topic_partitions=k.partitions,
        topic_replication_factor=k.replicas,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=k.session_timeout_s,
        broker_heartbeat_interval=k.heartbeat_interval_s,
        broker_rebalance_timeout=k.rebalance_timeout_s,
        broker_commit_interval=k.commit_interval_s,
        web_enabled=k.web_enabled,
        web_bind=settings.dashboard.host,
        web_port=k.web_port,
        web_host=settings.dashboard.host,
        producer_acks=-1,
        producer_max_request_size=k.max_message_bytes,
        producer_linger=k.producer_linger_s,
        # held events (the join, unflushed sink rows) are redelivered after a stop or rebalance by design:
        # do not wait for them to be acked before letting partitions go
        stream_wait_empty=False,
    )


def mount_dashboard(app: faust.App, resources: Resources, settings: Settings) -> None:
    """The built-in dashboard at /dashboard/ on faust's web server (this process owns the ClickHouse
    store: with chDB, the only process that may open its path), /metrics, /healthz, /readyz, and OTLP/HTTP
    (POST /v1/traces and /v1/logs, ``streams.otlp_http``). Off
    loopback, credentials are required and guard every page of the web server, faust's own included."""
    host = settings.dashboard.host
    require_credentials(host, settings.dashboard)
    web: Any = app.web  # faust's aiohttp driver (faust.web.drivers.aiohttp.Web)
    web_app = web.web_app
    # requests that do not parse (an oversized request line or header): 414/431/400 and one WARNING line
    # a while, not a traceback each (streams.dashboard.edges)
    web._runner = EdgeRunner(web_app, clock=resources.clock, access_log=None)
    if not is_loopback(host):
        web_app.middlewares.append(auth_middleware(settings.dashboard))
    web_app.add_subapp(
        "/dashboard/", dashboard_app(lambda: resources.store, settings.dashboard, settings, resources.privacy)
    )
    add_otlp_routes(web_app, resources.ctx)
    metrics = resources.ctx.metrics
    metrics.watch_lag(faust_lag(app))
    metrics.watch_counts(resources.totals)
    add_probe_routes(web_app, app, resources, metrics)


def processors(ctx: StreamContext, resources: Resources) -> list[Registrable]:
    """The processors of the configured topology, in data-flow order. With judging processes
    (``kafka.processes`` over 1, ``streams.processes``) they run the evaluate processor, alone, and this
    process everything else."""
    if resources.judging_only:
        return [EvaluateProcessor(ctx, resources)]
    staged: list[Registrable]
    if ctx.settings.kafka.topology == "fused":
        staged = [EvaluateProcessor(ctx, resources)] if judging_processes(ctx.settings) == 1 else []
    else:
        staged = [
            ConvertProcessor(ctx, resources),
            JudgeProcessor(ctx, resources),
            JoinProcessor(ctx, resources),
        ]
    kafka = ctx.settings.kafka
    otlp = kafka.otlp_input or kafka.otlp_logs_input
    inputs: list[Registrable] = [OtlpProcessor(ctx, resources)] if otlp else []
    return [
        *inputs,
        *staged,
        SinkProcessor(ctx, resources),
        TouchesProcessor(ctx, resources),
        LabelsProcessor(ctx, resources),
        DeadLetterRecorder(ctx, resources),
    ]


def create_app(settings: Settings, *, judging_only: bool = False) -> StreamApp:
    """The worker's app; ``judging_only``: one of its judging processes (``streams.processes``), which
    reads the interactions topic alone and opens neither ClickHouse nor a web server."""
    if judging_only:
        settings = settings.with_changes(kafka={"web_enabled": False, "datadir": None})
    temporary = settings.kafka.datadir is None
    datadir = settings.kafka.datadir or Path(tempfile.mkdtemp(prefix="groundwatch-faust-"))
    app = faust_app(settings, datadir)
    use_fetch_wait(app, settings.kafka.fetch_max_wait_s)
    ctx = new_context(settings, app)
    resources = Resources(ctx, judging_only=judging_only)
    for processor in processors(ctx, resources):
        processor.register()
    if settings.kafka.web_enabled:
        mount_dashboard(app, resources, settings)
    stream_app = StreamApp(
        app=app, ctx=ctx, resources=resources, datadir=datadir, temporary_datadir=temporary
    )
    stream_app.watch = BrokerWatch(settings.kafka, stream_app.lose_broker)
    stream_app.deadline = ShutdownDeadline(settings.kafka.shutdown_timeout_s)
    return stream_app
