"""What the processors share: settings, topics, the judge and the ClickHouse side, opened on worker start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import faust
from mode import Service
from pydantic import BaseModel

from pipeline.judges.base import Judge
from schemas.deadletter import DeadLetter
from schemas.interaction import Interaction
from schemas.results import Stage
from schemas.settings import Settings
from streams.codec import encode, fit_letter, original_of
from streams.topics import TopicNames, topic_names

if TYPE_CHECKING:
    from streams.clickhouse.store import ClickHouseStore

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


@dataclass
class StreamContext:
    settings: Settings
    app: faust.App
    names: TopicNames
    topics: dict[str, Any] = field(default_factory=dict)  # topic name -> faust Topic
    resources: Resources | None = None

    def topic(self, name: str) -> Any:
        if name not in self.topics:
            self.topics[name] = self.app.topic(
                name,
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
                partitions=self.settings.kafka.partitions,
            )
        return self.topics[name]

    async def send(self, name: str, key: str | None, value: BaseModel) -> None:
        """Send and wait until the broker has it: ``Topic.send`` only buffers and returns the delivery
        future (faust's flush before a commit does not raise for a failed send), so a failed delivery
        raises here and the source event is not acked."""
        delivery = await self.topic(name).send(key=key.encode("utf-8") if key else None, value=encode(value))
        await delivery

    async def send_dead(self, letter: DeadLetter) -> None:
        letter = fit_letter(letter, self.settings.kafka.deadletter_max_bytes)
        log.warning(
            "dead letter: stage=%s id=%s %s: %s",
            letter.stage,
            letter.interaction_id,
            letter.error_type,
            letter.error[:300],
        )
        await self.send(self.names.deadletter, letter.interaction_id, letter)

    async def send_dead_or_give_up(self, letter: DeadLetter, where: str, retry_delay_s: float = 1.0) -> None:
        """``send_dead`` retried with backoff, ``kafka.deadletter_attempts`` times in all; then an ERROR log
        naming the message (``where``: topic, partition, offset) and return, so the caller acks it and
        its partition moves on (the same policy as ``streams.runner.run_bounded``)."""
        attempts = self.settings.kafka.deadletter_attempts
        delay = retry_delay_s
        for attempt in range(1, attempts + 1):
            try:
                await self.send_dead(letter)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not dead-letter %s (attempt %d of %d)", where, attempt, attempts)
            if attempt < attempts:
                await asyncio.sleep(delay)
                delay *= 2
        log.error(
            "GIVING UP on %s: its dead letter (stage %s: %s) could not be sent after %d attempts; acking it "
            "so its partition moves on. Re-read it from that offset to recover it.",
            where,
            letter.stage,
            letter.error[:300],
            attempts,
        )

    async def decode_or_dead_letter(self, raw: bytes, model: type[M], source_topic: str) -> M | None:
        """The message as ``model``, or None after dead-lettering it (stage "validate": which field, why)."""
        from streams.codec import InvalidMessage, dead_letter, decode

        try:
            return decode(raw, model, self.settings.limits)
        except InvalidMessage as exc:
            await self.send_dead(
                dead_letter(stage="validate", error=exc, payload=raw, source_topic=source_topic)
            )
            return None

    async def dead_letter_judge_error(
        self, stage: Stage, exc: Exception, raw: bytes, source_topic: str, interaction: Interaction
    ) -> None:
        """A judge that still failed after its retries: the message goes to deadletter with its stage,
        the error, the payload and the original interaction (to replay it onto ``interactions``)."""
        from streams.codec import dead_letter

        await self.send_dead(
            dead_letter(
                stage=stage,
                error=exc,
                payload=raw,
                source_topic=source_topic,
                interaction_id=interaction.interaction_id,
                original=interaction.model_dump_json(),
            )
        )

    def bounded_agent(
        self,
        source: Any,
        name: str,
        handle: Callable[[Any], Awaitable[None]],
        stage: Stage,
        source_topic: str,
    ) -> Any:
        """Register ``handle`` as the agent ``name`` on ``source``: events handled concurrently, at most
        ``kafka.stage_concurrency`` at once, acked in offset order (streams.runner); an unexpected
        error dead-letters the event under ``stage``."""
        from streams.runner import run_bounded

        async def agent(stream: Any) -> None:
            await run_bounded(
                stream,
                handle,
                self.settings.kafka.stage_concurrency,
                on_error=self.dead_letter_on_error(stage, source_topic),
                error_attempts=self.settings.kafka.deadletter_attempts,
            )

        agent.__name__ = agent.__qualname__ = name.rsplit(".", 1)[-1] + "_agent"
        return self.app.agent(source, name=name)(agent)

    def dead_letter_on_error(
        self, stage: Stage, source_topic: str
    ) -> Callable[[Any, Exception], Awaitable[None]]:
        """An ``on_error`` for streams.runner: the message goes to deadletter with the stage and error."""

        async def on_error(event: Any, exc: Exception) -> None:
            from streams.codec import dead_letter

            key = event.key.decode("utf-8", "replace") if isinstance(event.key, bytes) else None
            await self.send_dead(
                dead_letter(
                    stage=stage,
                    error=exc,
                    payload=event.value,
                    source_topic=source_topic,
                    interaction_id=key,
                    original=original_of(event.value),
                )
            )

        return on_error

    @property
    def res(self) -> Resources:
        if self.resources is None:
            raise RuntimeError("stream resources are not attached")
        return self.resources


class Resources(Service):
    """Opens the judge (and what hangs on it) and the ClickHouse sink when the worker starts; closes them."""

    def __init__(self, ctx: StreamContext, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ctx = ctx
        self._stack = contextlib.AsyncExitStack()
        self._ready = asyncio.Event()
        self._finished = False
        self._judge: Judge | None = None
        self.refusals: Any = None  # pipeline.refusal.RefusalClassifier
        self.nli_judge: Any = None  # the judge, or pipeline.nli_grouping.NliGrouper over it (batched NLI)
        self.evaluator: Any = None  # pipeline.evaluator.Evaluator (fused topology)
        self.relevance: Any = None  # pipeline.metrics.relevance.RelevanceScorer (pipeline.relevance=true)
        self.store: Any = None  # streams.clickhouse.store.ClickHouseStore
        self.sink: Any = None  # streams.clickhouse.sink.EvaluationSink
        self.windows: Any = None  # streams.windows.tracker.WindowCloser
        self._alerts: Any = None  # streams.alerts.engine.AlertEngine

    async def on_start(self) -> None:
        from pipeline.evaluator import Evaluator
        from pipeline.judges.factory import open_judge
        from pipeline.nli_grouping import NliGrouper, nli_judge
        from pipeline.refusal import RefusalClassifier
        from streams.alerts.engine import AlertEngine
        from streams.clickhouse.sink import EvaluationSink
        from streams.clickhouse.store import ClickHouseStore
        from streams.windows.tracker import WindowCloser

        settings = self.ctx.settings
        # the last flush, window close and alerts run while faust's producer is still up: the app sends
        # on_before_shutdown after its consumer stopped and before its producer stops
        self.ctx.app.on_before_shutdown.connect(self._on_app_shutdown)
        self.store = await ClickHouseStore.open(settings.clickhouse)
        self._judge = await self._stack.enter_async_context(open_judge(settings))
        self.refusals = RefusalClassifier(self.judge, settings)
        # closed before the judge (LIFO), cancelling batches in flight (their events are unacked: they return)
        self._stack.push_async_callback(self.refusals.aclose, cancel=True)
        self.nli_judge = nli_judge(self.judge, settings)
        if isinstance(self.nli_judge, NliGrouper):
            self._stack.push_async_callback(self.nli_judge.aclose, cancel=True)
        if settings.pipeline.relevance:
            from pipeline.metrics.relevance import RelevanceScorer

            self.relevance = RelevanceScorer()
        if settings.kafka.topology == "fused":
            # relevance is scored by the fused processor itself, so a failure marks it missing (as the
            # staged join does) instead of failing the interaction (streams.processors.evaluate)
            self.evaluator = Evaluator(self.judge, settings)
            self._stack.push_async_callback(self.evaluator.aclose)
        alerts = self._alerts = AlertEngine.from_settings(settings, self.store, self._publish_alert)
        self._stack.push_async_callback(alerts.aclose)
        self.windows = WindowCloser(settings.window, self.store, alerts)
        stale = await self.windows.reconcile(timedelta(hours=settings.window.reconcile_hours))
        if stale:
            log.info("%d windows left unclosed by an earlier worker will be recomputed", stale)
        self.sink = EvaluationSink(
            settings.clickhouse, self.store, on_flushed=self._after_flush, on_rejected=self._reject_row
        )
        self._ready.set()
        await self.write_status()
        log.info(
            "groundwatch resources ready (judge=%s, clickhouse=%s)", self.judge.name, self.store.describe()
        )

    @property
    def store_open(self) -> ClickHouseStore:
        """The ClickHouse store, once the resources are ready."""
        if self.store is None:
            raise RuntimeError("the ClickHouse store is not open yet")
        store: ClickHouseStore = self.store
        return store

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            raise RuntimeError("the judge is not open yet")
        return self._judge

    async def _after_flush(self, rows: Sequence[Any]) -> None:
        await self.windows.touch(rows)
        await self.write_status()

    async def _reject_row(self, evaluation: Any, exc: Exception) -> None:
        """A row ClickHouse keeps rejecting (streams.clickhouse.sink): to deadletter, stage "sink"."""
        from streams.codec import dead_letter

        await self.ctx.send_dead(
            dead_letter(
                stage="sink",
                error=exc,
                payload=evaluation.model_dump_json(),
                source_topic=self.ctx.names.evaluations,
                interaction_id=evaluation.interaction_id,
            )
        )

    async def write_status(self) -> None:
        """Table counts to ``clickhouse.status_file`` (when set), for followers that cannot open chDB."""
        path = self.ctx.settings.clickhouse.status_file
        if path is None or self.store is None:
            return
        from streams.status import WorkerStatus, write_status

        counts = await self.store.counts()
        status = WorkerStatus(
            counts=counts,
            windows_written=self.windows.written if self.windows else 0,
            alerts_fired=self._alerts.fired if self._alerts else 0,
        )
        await asyncio.to_thread(write_status, path, status)

    async def _publish_alert(self, alert: BaseModel, key: str) -> None:
        await self.ctx.send(self.ctx.names.alerts, key, alert)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> Resources:
        await self._ready.wait()
        return self

    async def _on_app_shutdown(self, sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await self.finish()

    async def finish(self) -> None:
        """Flush the sink, write the open windows (and fire their alerts), write the status file; once."""
        if self._finished:
            return
        self._finished = True
        if self.sink is not None:
            try:
                await self.sink.flush()
            except Exception:  # the rows stay unacked and come back after a restart
                log.exception("final flush failed")
        if self.windows is not None:
            try:  # rows flushed so far are complete: write their windows
                await self.windows.close_due(final=True)
            except Exception:
                log.exception("closing the open windows on stop failed (recomputed at the next start)")
            try:
                await self.write_status()
            except Exception:
                log.exception("writing the status file on stop failed")

    async def on_stop(self) -> None:
        await self.finish()  # when the app's shutdown signal did not come first
        await self._stack.aclose()
        if self.store is not None:
            await self.store.aclose()


def new_context(settings: Settings, app: faust.App) -> StreamContext:
    return StreamContext(settings=settings, app=app, names=topic_names(settings.kafka))
