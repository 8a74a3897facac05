"""Each interaction's topic by a topic model (``topics.model_file``, written by ``groundwatch topics``):
its question embedded (``pipeline.embeddings``, in a thread) and assigned to the nearest topic
(``pipeline.topic_discovery.assign``). One rule for both topologies: the evaluator and the staged join
call ``with_topic`` on the Evaluation they assembled. A failure is logged and leaves the topic out; it
never fails the interaction."""

from __future__ import annotations

import asyncio
import logging
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
    batch of 64 about 9 ms each, docs/topics.md)."""

    def __init__(self, model: TopicModel, encoder: TextEncoder | None = None, batch_size: int = 64) -> None:
        self.model = model
        self.encoder = encoder or TextEncoder()
        self.batch_size = batch_size
        self._queue: list[tuple[str, asyncio.Future[Assigned]]] = []
        self._drain: asyncio.Task[None] | None = None

    def _assign(self, questions: list[str]) -> list[Assigned]:
        return assign(self.model, self.encoder.encode(questions))

    async def topic_of(self, question: str) -> Assigned:
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
            for (_, future), assigned in zip(batch, found, strict=True):
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
    """The assigner of ``topics.model_file`` (the embeddings extra checked now), or None without one."""
    if settings.model_file is None:
        return None
    model = read_model(settings.model_file)
    encoder = TextEncoder()
    encoder.require()
    return TopicAssigner(model, encoder)


async def with_topic(assigner: TopicAssigner | None, evaluation: Evaluation, question: str) -> Evaluation:
    """The evaluation with its question's topic (unchanged without an assigner, or when it fails)."""
    if assigner is None:
        return evaluation
    try:
        found = await assigner.topic_of(question)
    except Exception as exc:
        log.warning("topic of %s failed: %s", evaluation.interaction_id, exc)
        return evaluation
    return evaluation.model_copy(update={"topic": found.topic, "topic_label": found.label})
