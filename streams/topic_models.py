"""Topic models in a running deployment: one worker refits, every process assigns by the newest.

- **Who refits** (``TopicRefitter``): the owner of the key ``topics`` among the ``touches`` partitions
  (``streams.ownership``), as a series' windows belong to the owner of theirs: the group decides, and a
  rebalance moves the refits with the partition. Every ``topics.refit_every`` (from the current model's
  ``fitted_at``, on the worker's clock) it reads the questions stored over ``topics.refit_over`` (the
  latest ``refit_max_questions``, as stored: masked where privacy masks them), refits from the current
  model in a child process (``pipeline.topic_refit``), and sends the model to the ``topic_models``
  topic. Without a model yet (no ``model_file``) the first fit is made as soon as enough questions are
  stored (``2 x min_topic_size``, looked at every ``poll_seconds``). A refit that fails is logged and
  tried again after ``refit_every``.
- **Who assigns by it** (``follow_topic_models``): every process with topics on, the judging processes
  included, reads the ``topic_models`` topic from its start with a consumer of its own (no group: each
  reads every message) and takes each model fitted after its current one (``TopicAssigner.use``). A
  worker that starts later reads the same messages, so every process assigns by the newest model, the
  file's or a refit's, whichever was fitted last. Interactions assigned before keep their topic and the
  version that gave it (the ``topic_model`` dimension).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline.clock import Clock
from pipeline.topic_assignment import TopicAssigner
from pipeline.topic_refit import RefitFailed, refit
from schemas.errors import BrokerUnavailable
from schemas.settings import KafkaSettings, TopicsSettings
from schemas.topic_model import TopicModel
from streams.clickhouse.questions import stored_questions
from streams.clickhouse.store import ClickHouseStore
from streams.kafka_auth import aiokafka_auth
from streams.ownership import Ownership
from streams.topics import bootstrap_servers

log = logging.getLogger(__name__)

#: the key of the topic models on their topic, and whose partition of ``touches`` names the refitting worker
TOPICS_KEY = "topics"


class TopicRefitter:
    """``tick()``: refit when this worker owns ``TOPICS_KEY`` and a refit is due (module docstring)."""

    def __init__(
        self,
        settings: TopicsSettings,
        assigner: TopicAssigner,
        store: ClickHouseStore,
        ownership: Ownership,
        publish: Callable[[TopicModel], Awaitable[object]],
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.assigner = assigner
        self.store = store
        self.ownership = ownership
        self.publish = publish
        self.clock = clock
        self.tried_at: datetime | None = None  # the last attempt's time: a failed one waits refit_every
        self._said_too_few = False
        self.refits = 0

    @property
    def poll_seconds(self) -> float:
        """How often to look whether a refit is due: a tenth of ``refit_every``, within 1 to 30 s."""
        every = self.settings.refit_every
        return 30.0 if every is None else max(1.0, min(30.0, every.total_seconds() / 10))

    def due(self) -> bool:
        """A refit ``refit_every`` after the current model was fitted and after the last attempt; without
        a model, a first fit at every look (``poll_seconds``) until one is made."""
        every = self.settings.refit_every
        if every is None:
            return False
        now, model = self.clock.now(), self.assigner.model
        wait = every if model is not None else timedelta(seconds=self.poll_seconds)
        if self.tried_at is not None and now - self.tried_at < wait:
            return False
        return model is None or now - model.fitted_at >= every

    async def tick(self) -> TopicModel | None:
        """The model of the refit made now, or None (not this worker's, not due, or it failed)."""
        if not self.ownership.owns_key(TOPICS_KEY) or not self.due():
            return None
        now = self.tried_at = self.clock.now()
        s = self.settings
        texts = await asyncio.to_thread(
            stored_questions, self.store, now - s.refit_over, now, None, s.refit_max_questions
        )
        if len(texts) < 2 * s.min_topic_size:
            if not self._said_too_few:  # said once: without a model this is looked at every poll
                log.info("topics: a fit needs %d stored questions, %d since %s; looking again later",
                         2 * s.min_topic_size, len(texts), now - s.refit_over)  # fmt: skip
            self._said_too_few = True
            return None
        self._said_too_few = False
        previous = self.assigner.model
        try:
            model = await refit(texts, s, previous, now)
        except RefitFailed as exc:
            log.warning("topics: the refit of %d questions failed: %s; trying again in %s", len(texts), exc,
                        s.refit_every)  # fmt: skip
            return None
        await self.publish(model)
        self.assigner.use(model)
        self.refits += 1
        kept = len({t.id for t in model.topics} & {t.id for t in previous.topics}) if previous else 0
        log.info("topics: refit v%d on %d questions: %d topics, %d of them kept their ids", model.version,
                 len(texts), len(model.topics), kept)  # fmt: skip
        return model


async def follow_topic_models(kafka: KafkaSettings, topic: str, assigner: TopicAssigner) -> None:
    """Read ``topic`` from its start, for ever, and give ``assigner`` each model fitted after its own
    (module docstring). A message that is not a topic model is logged and skipped."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers(kafka.broker), group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_wait_ms=round(kafka.fetch_max_wait_s * 1000),
        **aiokafka_auth(kafka),
    )  # fmt: skip
    await consumer.start()
    try:
        partitions = await _partitions(consumer, topic)
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        await consumer.seek_to_beginning()
        async for message in consumer:
            try:
                model = TopicModel.model_validate_json(message.value or b"")
            except ValueError as exc:
                log.warning("topics: %s[%d]@%d is not a topic model, skipped: %s", topic, message.partition,
                            message.offset, str(exc).splitlines()[0])  # fmt: skip
                continue
            assigner.use(model)
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    """The partitions of ``topic``; the worker created it before it started (``ensure_topics``)."""
    await consumer.topics()  # a metadata update
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise BrokerUnavailable(f"the broker has no topic {topic}")
    return set(partitions)
