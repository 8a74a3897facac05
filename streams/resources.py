"""What the processors use besides Kafka: the judge (and what hangs on it) and the ClickHouse side.

Opened when the worker starts (a faust/mode Service), closed when it stops; processors wait for
``ready`` before their first event. Sending stays in ``streams.context.StreamContext``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

from mode import Service
from pydantic import BaseModel

from pipeline.argument_judge import ArgumentJudge
from pipeline.clock import SYSTEM_CLOCK, Clock
from pipeline.conversation_judge import ConversationJudge
from pipeline.custom_evaluators import CustomEvaluators, open_custom
from pipeline.evaluator import Evaluator
from pipeline.feedback import feedback_labels
from pipeline.judges.base import Judge
from pipeline.judges.factory import open_judge
from pipeline.metrics.relevance import RelevanceScorer
from pipeline.nli_grouping import EntailJudge, NliGrouper, nli_judge
from pipeline.privacy.mask import PrivacyGuard
from pipeline.refusal import RefusalClassifier
from pipeline.retry import retry
from pipeline.sampling import Sampler
from pipeline.topic_assignment import TopicAssigner, open_topics
from schemas.errors import GroundwatchError
from schemas.evaluation import Evaluation
from schemas.safe_text import safe_text
from schemas.touch import Touch
from streams.alerts.engine import AlertEngine
from streams.clickhouse.batch import DeadLetterRows
from streams.clickhouse.conversations import ConversationRows
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.sink import EvaluationSink, Located
from streams.clickhouse.store import ClickHouseStore
from streams.context import StreamContext
from streams.handoff import Handoff
from streams.loop_lag import watch_loop_lag
from streams.ownership import Ownership, follow_assignment, topic_partitions
from streams.status import WorkerStatus, write_status
from streams.topic_models import TOPICS_KEY, TopicRefitter, follow_topic_models
from streams.touches import TouchSender
from streams.windows.closer import WindowCloser
from streams.windows.conversations import At, ConversationCloser

log = logging.getLogger(__name__)

#: Evaluations held for the sink while their messages come back (small flags, not the Evaluations: those
#: wait in the sink's batch); past it the oldest are decoded and written again when they come back
HANDOFF_HELD = 50_000


class NotReady(GroundwatchError, RuntimeError):
    """A resource was used before the worker opened it."""


class Resources(Service):
    """Opens the judge, the refusal classifier, the NLI grouper, the ClickHouse store and sink, the
    window closer and the alert engine on worker start; closes them on stop."""

    def __init__(
        self, ctx: StreamContext, clock: Clock | None = None, *, judging_only: bool = False, **kwargs: Any
    ) -> None:
        """``judging_only``: a judging process's (``streams.processes``): the judge and the evaluator,
        no ClickHouse, windows or alerts."""
        super().__init__(**kwargs)
        self.ctx = ctx
        self.judging_only = judging_only
        # the worker's one clock: windows, alerts, the sink, the join, retries and the judge read time from it
        self.clock: Clock = clock or ctx.clock
        ctx.clock = self.clock
        sampling = ctx.settings.sampling  # which interactions are judged; budgets read time from the clock
        self.sampler = Sampler.from_files(sampling.rules_file, sampling.default_rate, self.clock)
        self.privacy = PrivacyGuard(ctx.settings.privacy)  # privacy.mode: what the judge and storage see
        self._stack = contextlib.AsyncExitStack()
        self._ready = asyncio.Event()
        self._finished = False
        self._status_failing = False  # the last status-file write failed (logged once)
        self._status_due = False  # a write since the status file was last written
        self._status_at: float | None = None  # when it was (clock.monotonic)
        self._judge: Judge | None = None
        self._refusals: RefusalClassifier | None = None
        self._nli_judge: EntailJudge | NliGrouper | None = None
        self._evaluator: Evaluator | None = None  # the fused topology's
        self.custom: CustomEvaluators | None = None  # evaluators.file (pipeline.custom_evaluators)
        # tools.argument_judge llm: the staged join's review of unsupported tool arguments
        self.arguments: ArgumentJudge | None = None
        self.relevance: RelevanceScorer | None = None  # pipeline.relevance=true
        self.topics: TopicAssigner | None = None  # topics.model_file, topics.refit_every
        self.refitter: TopicRefitter | None = None  # topics.refit_every, this process writes ClickHouse
        self.store: ClickHouseStore | None = None
        self._sink: EvaluationSink | None = None
        self._dead_letter_rows: DeadLetterRows | None = None
        self._windows: WindowCloser | None = None
        self.conversations: ConversationCloser | None = None  # None: conversations.enabled false
        self._alerts: AlertEngine | None = None
        # which windows and conversations are this worker's: the group's assignment of the touches topic
        names, kafka = ctx.names, ctx.settings.kafka
        self.ownership = Ownership(names.touches, topic_partitions(ctx.app, names.touches, kafka.partitions))
        self._unreconciled: set[int] = set()  # partitions gained whose work is not looked for yet
        self.touches = TouchSender(ctx)
        # the Evaluations the fused processor made, handed to the sink without a decode (streams.handoff)
        self.handoff = Handoff(HANDOFF_HELD)

    # ---- the opened resources (NotReady before on_start) -----------------------------------------
    @property
    def judge(self) -> Judge:
        return _opened(self._judge, "judge")

    @property
    def refusals(self) -> RefusalClassifier:
        return _opened(self._refusals, "refusal classifier")

    @property
    def nli_judge(self) -> EntailJudge | NliGrouper:
        return _opened(self._nli_judge, "NLI judge")

    @property
    def evaluator(self) -> Evaluator:
        return _opened(self._evaluator, "evaluator (fused topology only)")

    @property
    def store_open(self) -> ClickHouseStore:
        return _opened(self.store, "ClickHouse store")

    @property
    def sink(self) -> EvaluationSink:
        return _opened(self._sink, "ClickHouse sink")

    @property
    def dead_letter_rows(self) -> DeadLetterRows:
        return _opened(self._dead_letter_rows, "dead-letter rows")

    @property
    def windows(self) -> WindowCloser:
        return _opened(self._windows, "window closer")

    # ---- lifecycle ---------------------------------------------------------------------------------
    @Service.task
    async def _loop_lag(self) -> None:
        """The event loop's lag on /metrics, from the start to the stop (``streams.loop_lag``), on the real
        clock: the loop's lag is real time whatever clock the worker runs on (an injected one would neither
        see it nor should be moved by it)."""
        lagged, running = self.ctx.metrics.loop_lagged, lambda: not self.should_stop
        await watch_loop_lag(SYSTEM_CLOCK, lagged, running=running)

    @Service.task
    async def _topic_models(self) -> None:
        """Assign by the newest topic model on the topic_models topic (``streams.topic_models``), from the
        start to the stop, in every process with topics on; a broker failure is retried."""
        await self.wait_ready()
        assigner = self.topics
        if assigner is None:
            return
        kafka, topic = self.ctx.settings.kafka, self.ctx.names.topic_models
        await retry(
            lambda: follow_topic_models(kafka, topic, assigner), what="topics: reading the topic models",
            sleep=self.clock.sleep, level=logging.WARNING,
        )  # fmt: skip

    @Service.task
    async def _refit_topics(self) -> None:
        """A refit when one is due and this worker owns it (``streams.topic_models``), looked at every
        tenth of ``topics.refit_every`` (1 to 30 s), from the start to the stop."""
        await self.wait_ready()
        refitter = self.refitter
        if refitter is None:
            return
        while not self.should_stop:
            if not self.ownership.suspended:
                try:
                    await refitter.tick()
                except Exception:  # a store or broker failure: the next look tries again
                    log.exception("topics: the refit failed; will retry")
            await self.clock.sleep(refitter.poll_seconds)

    async def on_start(self) -> None:
        settings = self.ctx.settings
        # the last flush, window close and alerts run while faust's producer is still up: the app sends
        # on_before_shutdown after its consumer stopped and before its producer stops
        self.ctx.app.on_before_shutdown.connect(self._on_app_shutdown)
        if self.judging_only:
            await self._open_judging()
            self._ready.set()
            log.info("groundwatch judging process ready (judge=%s)", self.judge.name)
            return
        store = self.store = await ClickHouseStore.open(settings.clickhouse, dimensions=settings.dimensions)
        await self._open_judging()
        alerts = self._alerts = AlertEngine.from_settings(
            settings, store, self._publish_alert, clock=self.clock
        )
        self._stack.push_async_callback(alerts.aclose)
        await alerts.redeliver_due()  # notifications an earlier worker stored and never recorded
        rollups = ConversationRows(store) if settings.conversations.enabled else None
        self._windows = WindowCloser(settings.window, store, alerts, clock=self.clock, conversations=rollups)
        if rollups is not None:
            mask = self.privacy.text_for_judge
            pair_judge = ConversationJudge(self._judge, settings.conversations, mask=mask)
            if pair_judge and pair_judge.llm is None:
                log.warning("conversations.judge is llm but the judge has no LLM: re-asks and contradictions "
                            "stay lexical (each rollup's judge_failure says so)")  # fmt: skip
            # a rollup written touches the windows it counts in: through their owner (streams.touches)
            self.conversations = ConversationCloser(
                settings.conversations, settings.window, rollups, self.touches, clock=self.clock,
                judge=pair_judge, budgets=self.sampler.budgets,
            )  # fmt: skip
        self._sink = EvaluationSink(
            settings.clickhouse,
            store,
            on_rejected=self._reject_row,
            on_written=self._written,
            clock=self.clock,
            before_ack=self._after_flush,
        )
        ch = settings.clickhouse
        self._dead_letter_rows = DeadLetterRows(
            store.insert_dead_letter_rows, ch.dead_letter_batch_rows, ch.dead_letter_batch_seconds,
            clock=self.clock, on_written=self._dead_letters_written, insert_share=ch.insert_share,
        )  # fmt: skip
        if self.topics is not None and settings.topics.refit_every is not None:
            names = self.ctx.names
            self.refitter = TopicRefitter(
                settings.topics, self.topics, store, self.ownership,
                lambda model: self.ctx.send(names.topic_models, TOPICS_KEY, model), self.clock,
            )  # fmt: skip
        self._ready.set()
        await self.write_status()
        log.info("groundwatch resources ready (judge=%s, clickhouse=%s)", self.judge.name, store.describe())

    async def _open_judging(self) -> None:
        settings = self.ctx.settings
        judge = self._judge = await self._stack.enter_async_context(open_judge(settings, self.clock))
        self._refusals = RefusalClassifier(judge, settings)
        # closed before the judge (LIFO), cancelling batches in flight (their events are unacked: they return)
        self._stack.push_async_callback(self._refusals.aclose, cancel=True)
        grouped = self._nli_judge = nli_judge(judge, settings)
        if isinstance(grouped, NliGrouper):
            self._stack.push_async_callback(grouped.aclose, cancel=True)
        if settings.pipeline.relevance:
            self.relevance = RelevanceScorer()
            self.relevance.require()
        # your own evaluators (evaluators.file, read and checked before start by the worker command)
        self.custom = open_custom(settings.evaluators, judge, self.clock)
        if self.custom is not None:
            self._stack.callback(self.custom.close)
        # each interaction's topic by topics.model_file (pipeline.topic_assignment), in both topologies
        self.topics = open_topics(settings.topics)
        if self.topics is not None:
            self._stack.push_async_callback(self.topics.aclose)
        self.arguments = ArgumentJudge(judge, settings)
        if settings.kafka.topology == "fused":
            self._evaluator = Evaluator(
                judge,
                settings,
                relevance_scorer=self.relevance,
                custom=self.custom,
                clock=self.clock,
                topics=self.topics,
            )
            self._stack.push_async_callback(self._evaluator.aclose)

    def _written(self, evaluations: list[Evaluation], seconds: float) -> None:
        """Evaluations are in ClickHouse: count them and their calls, and charge the judge budgets."""
        self.ctx.metrics.written(evaluations, seconds)
        self.sampler.record(evaluations)

    async def _dead_letters_written(self, rows: int, seconds: float) -> None:
        self.ctx.metrics.recorded(rows)
        await self.update_status()

    async def _after_flush(self, rows: list[Evaluation], before: Sequence[Located]) -> None:
        """Rows are written (their events not acked yet): end users' labels are written with them, their
        windows and conversations are touched at their owners (where they counted before too); the rows
        of one interaction are this worker's to write. A failure leaves the events unacked: written and
        touched again."""
        await self._end_user_labels(rows)
        await self.touches.written([*before, *rows])
        if self.conversations is not None:
            self.conversations.pend_singles(rows)
        await self.update_status()

    # ---- ownership (streams.ownership) ------------------------------------------------------------
    def follow_assignment(self) -> None:
        """Follow the group's assignment of the touches topic: what this worker closes."""
        follow_assignment(self.ctx.app, self.ownership, self._revoked, self._rebalanced)

    async def _revoked(self) -> None:
        """A rebalance takes the partitions: the closing under way ends after its current batch (waited
        for, a little), so the next owner does not judge and write the same conversations and windows."""
        wait_s = min(10.0, self.ctx.settings.kafka.shutdown_timeout_s / 3)
        closers = [c for c in (self._windows, self.conversations) if c is not None]
        ended = await asyncio.gather(*(c.pause(wait_s) for c in closers))
        if not all(ended):
            log.warning("ownership: a close round still running %g s after the partitions were revoked; "
                        "their next owner may repeat its last batch", wait_s)  # fmt: skip

    async def _rebalanced(self, gained: frozenset[int], lost: frozenset[int]) -> None:
        """Forget the windows and conversations of the partitions lost (their new owner finds them in
        ClickHouse); those of the partitions gained are looked for at the next tick (``reconcile_owned``),
        not in the rebalance. Closing resumes."""
        for closer in (self._windows, self.conversations):
            if closer is not None:
                closer.resume()
        if lost:
            forgot = self._windows.forget(self.ownership.owns) if self._windows else 0
            if self.conversations is not None:
                forgot += self.conversations.forget(self.ownership.owns)
            log.info("ownership: partitions %s moved to another worker; %d pending windows and "
                     "conversations left to it", sorted(lost), forgot)  # fmt: skip
        self._unreconciled = (self._unreconciled - lost) | gained

    async def reconcile_owned(self) -> None:
        """Find in ClickHouse what the partitions this worker gained hold: windows left unclosed,
        conversations left unrolled by the last owner or a crashed worker (as at a start). Retried at
        the next tick when ClickHouse fails."""
        parts = frozenset(self._unreconciled)
        if not parts or not self.ready or self.ownership.suspended:
            return
        owns = self.ownership.within(parts)
        lookback = timedelta(hours=self.ctx.settings.window.reconcile_hours)
        try:
            stale = await self.windows.reconcile(lookback, owns)
            unrolled = (await self.conversations.reconcile(lookback, owns))[0] if self.conversations else 0
        except Exception as exc:
            log.warning("ownership: looking for the work of partitions %s failed (%s: %s); will retry",
                        sorted(parts), type(exc).__name__, safe_text(str(exc), 300))  # fmt: skip
            return
        self._unreconciled -= parts
        if stale or unrolled:
            log.info("ownership: partitions %s: %d windows to recompute and %d conversations to roll up, "
                     "left by their last owner", sorted(parts), stale, unrolled)  # fmt: skip

    async def touched(self, touch: Touch) -> None:
        """A touch of work this worker owns (``streams.processors.touches``)."""
        if touch.conversation_id is None:
            await self.windows.touch([At(touch.app, touch.model, at) for at in touch.at])
        elif self.conversations is not None:
            self.conversations.touched(touch)

    async def _end_user_labels(self, evaluations: list[Evaluation]) -> None:
        """End users' thumbs of a batch just stored, as labels (``labels.end_user_feedback``), written
        before the batch's acks: if this fails, the batch stays unacked and is written again with them."""
        rule = self.ctx.settings.labels.end_user_feedback
        if rule is None:
            return
        labels = feedback_labels(evaluations, rule, self.clock.now())
        if labels:
            await LabelStore(self.store_open).insert(labels)

    async def _reject_row(self, evaluation: Evaluation, exc: Exception) -> None:
        """A row ClickHouse keeps rejecting (streams.clickhouse.sink): to deadletter, stage "sink" (its
        id from the row itself: the same row rejected again replaces its ``dead_letters`` row)."""
        await self.ctx.dead_letter(
            exc,
            "sink",
            evaluation.model_dump_json(),
            source_topic=self.ctx.names.evaluations,
            interaction_id=evaluation.interaction_id,
        )

    async def write_status(self) -> None:
        """Table counts to ``clickhouse.status_file`` (when set), for followers that cannot open chDB."""
        path = self.ctx.settings.clickhouse.status_file
        if path is None or self.store is None:
            return
        status = WorkerStatus(
            updated_at=self.clock.now(),
            counts=await self.store.counts(),
            windows_written=self._windows.written if self._windows else 0,
            alerts_fired=self._alerts.fired if self._alerts else 0,
        )
        await asyncio.to_thread(write_status, path, status)

    async def update_status(self) -> None:
        """After a write that succeeded (rows inserted and acked, windows closed): the status file is due,
        written now when ``clickhouse.status_every_s`` has passed since the last, else by ``status_if_due``
        (the sink's flush timer) once it has."""
        self._status_due = True
        await self.status_if_due()

    async def status_if_due(self) -> None:
        """``write_status`` when a write made it due and the pace allows: a status file that cannot be
        written is logged here, as what failed, once until it is written again, and never raised into
        the write before it (which would be taken for a failed insert)."""
        now, every = self.clock.monotonic(), self.ctx.settings.clickhouse.status_every_s
        if not self._status_due or (self._status_at is not None and now - self._status_at < every):
            return
        self._status_due, self._status_at = False, now
        try:
            await self.write_status()
        except Exception as exc:
            if not self._status_failing:
                log.warning("status file %s: cannot be written (%s: %s); the rows and windows are written; "
                            "will try again after the next write", self.ctx.settings.clickhouse.status_file,
                            type(exc).__name__, safe_text(str(exc), 300))  # fmt: skip
            self._status_failing = True
            return
        if self._status_failing:
            log.warning("status file %s: written again", self.ctx.settings.clickhouse.status_file)
            self._status_failing = False

    async def _publish_alert(self, alert: BaseModel, key: str) -> None:
        await self.ctx.send(self.ctx.names.alerts, key, alert)

    def totals(self) -> dict[str, int]:
        """Counts kept by the window closer and the alert engine (for /metrics)."""
        return {
            "windows_closed": self._windows.written if self._windows else 0,
            "window_close_failures": self._windows.failed if self._windows else 0,
            "windows_dropped": self._windows.dropped if self._windows else 0,  # given up after retries
            # closed again with nothing new (the touch of rows already counted): not written again
            "windows_unchanged": self._windows.unchanged if self._windows else 0,
            "touches_sent": self.touches.sent,  # work handed to its owner (streams.touches)
            "conversations_closed": self.conversations.written if self.conversations else 0,
            "alert_transitions": self._alerts.fired if self._alerts else 0,  # firing and resolved
            "alert_delivery_failures": self._alerts.delivery_failures if self._alerts else 0,
        }

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> Resources:
        await self._ready.wait()
        return self

    async def _on_app_shutdown(self, sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await self.finish()

    async def finish(self) -> None:
        """Flush the sink and the dead-letter rows, write the open windows (and fire their alerts), write
        the status file; once."""
        if self._finished:
            return
        self._finished = True
        if self._sink is not None:
            try:
                await self._sink.flush()
            except Exception:  # the rows stay unacked and come back after a restart
                log.exception("final flush failed")
        if self._dead_letter_rows is not None:
            try:
                await self._dead_letter_rows.flush()
            except Exception:  # unacked: read again after a restart
                log.exception("writing the dead-letter rows on stop failed")
        # the due conversations, then the open windows (which count them), share a third of the stop's
        # time: the conversations first, the windows get what is left; what either leaves is logged and
        # done at the next start (``reconcile``)
        if self.ownership.rebalancing:  # what this worker held is its next owner's
            log.info("stopping during a rebalance: the pending windows and conversations are left to "
                     "their next owner")  # fmt: skip
            return
        budget = self.ctx.settings.kafka.shutdown_timeout_s / 3
        started = self.clock.monotonic()
        if self.conversations is not None:
            try:
                await self.conversations.finish(budget)
            except Exception:
                log.exception("closing the due conversations on stop failed (rolled up at the next start)")
        if self._windows is not None:
            # rows flushed so far are complete: write their windows (after the timer's round under way,
            # never beside it) in what is left of the budget; the rest are recomputed at the next start
            left = max(0.0, budget - (self.clock.monotonic() - started))
            try:
                await self._windows.finish(left)
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


T = TypeVar("T")


def _opened(value: T | None, what: str) -> T:
    if value is None:
        raise NotReady(f"the {what} is not open yet")
    return value
