"""Each interaction's topic by a topic model (``topics.model_file``, written by ``groundwatch topics``, or
the newest refit the worker read, ``streams.topic_models``):
its question embedded (``pipeline.embeddings``, in a thread) and assigned to the nearest topic
(``pipeline.topic_discovery.assign``). One rule for both topologies: the evaluator and the staged join
call ``with_topic`` on the Evaluation they assembled. A failure is logged and leaves the topic out; it
never fails the interaction."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from pathlib import Path

from pipeline.embeddings import TextEncoder
from pipeline.topic_discovery import Assigned, assign
from schemas.errors import ConfigError
from schemas.evaluation import Evaluation
from schemas.settings import TopicsSettings
from schemas.topic_model import TopicModel

log = logging.getLogger(__name__)


class TopicAssigner:
    """``await assigner.topic_of(question)``: the question's topic by ``model``.

    Questions are embedded in batches: the questions that arrive while a batch is being embedded (in a
    thread) make the next one, up to ``batch_size``; a lone question goes at once. No timer: under load
    the batches fill by themselves, and at rest nothing waits (one question: about 42 ms of CPU, in a
    batch of 64 about 9 ms each, docs/topics.md). The topics of the latest ``remembered`` distinct
    questions are kept: traffic repeats its questions, and a repeated one is not embedded again."""

    def __init__(
        self,
        model: TopicModel | None,
        encoder: TextEncoder | None = None,
        batch_size: int = 64,
        remembered: int = 10_000,
    ) -> None:
        self.model = model
        self.encoder = encoder or TextEncoder()
        self.batch_size = batch_size
        self.remembered = remembered
        self._known: OrderedDict[str, Assigned] = OrderedDict()
        self._queue: list[tuple[str, asyncio.Future[Assigned]]] = []
        self._drain: asyncio.Task[None] | None = None

    def use(self, model: TopicModel) -> bool:
        """Assign by ``model`` from now on when it was fitted after the current one (a model read twice,
        or an older one, changes nothing); the remembered topics are forgotten. True when it was taken."""
        if self.model is not None and model.fitted_at <= self.model.fitted_at:
            return False
        self.model = model
        self._known.clear()
        log.info("topics: assigning by topic model v%d (%d topics, fitted %s)", model.version,
                 len(model.topics), model.fitted_at.isoformat())  # fmt: skip
        return True

    def _assign(self, questions: list[str]) -> list[Assigned]:
        model = self.model
        if model is None:
            raise ValueError("no topic model yet")
        return assign(model, self.encoder.encode(questions))

    def _remember(self, question: str, assigned: Assigned) -> None:
        if self.remembered <= 0:
            return
        self._known[question] = assigned
        self._known.move_to_end(question)
        while len(self._known) > self.remembered:
            self._known.popitem(last=False)

    async def topic_of(self, question: str) -> Assigned:
        known = self._known.get(question)
        if known is not None:
            self._known.move_to_end(question)
            return known
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Assigned] = loop.create_future()
        self._queue.append((question, future))
        if self._drain is None or self._drain.done():
            self._drain = loop.create_task(self._embed_queued())
        return await future

    async def _embed_queued(self) -> None:
        while self._queue:
            batch = [(q, f) for q, f in self._queue[: self.batch_size] if not f.done()]
            del self._queue[: self.batch_size]
            if not batch:
                continue
            try:
                found = await asyncio.to_thread(self._assign, [q for q, _ in batch])
            except Exception as exc:  # each caller hears of it (with_topic logs it and goes on)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (question, future), assigned in zip(batch, found, strict=True):
                if self.model is not None and assigned.version == self.model.version:
                    self._remember(question, assigned)
                if not future.done():
                    future.set_result(assigned)

    async def aclose(self) -> None:
        """Stop embedding; the callers still waiting are cancelled."""
        if self._drain is not None and not self._drain.done():
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()


def read_model(path: Path) -> TopicModel:
    """The topic model in ``path``; ConfigError in one line when there is none or it is not one."""
    if not path.is_file():
        raise ConfigError(f"topics.model_file: no such file: {path}")
    try:
        return TopicModel.model_validate_json(path.read_bytes())
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"topics.model_file: {path} is not a topic model ({first})") from None


def open_topics(settings: TopicsSettings) -> TopicAssigner | None:
    """The assigner of ``topics.model_file`` (the embeddings extra checked now); with ``refit_every`` and
    no file, one without a model until the first fit; None when topics are off."""
    if settings.model_file is None and settings.refit_every is None:
        return None
    model = read_model(settings.model_file) if settings.model_file is not None else None
    encoder = TextEncoder()
    encoder.require()
    return TopicAssigner(model, encoder, remembered=settings.remembered_questions)


async def with_topic(assigner: TopicAssigner | None, evaluation: Evaluation, question: str) -> Evaluation:
    """The evaluation with its question's topic (unchanged without an assigner or a model yet, or when it
    fails)."""
    if assigner is None or assigner.model is None:
        return evaluation
    try:
        found = await assigner.topic_of(question)
    except Exception as exc:
        log.warning("topic of %s failed: %s", evaluation.interaction_id, exc)
        return evaluation
    return evaluation.model_copy(
        update={"topic": found.topic, "topic_label": found.label, "topic_model": found.version}
    )
