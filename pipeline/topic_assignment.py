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
    """``await assigner.topic_of(question)``: the question's topic by ``model``."""

    def __init__(self, model: TopicModel, encoder: TextEncoder | None = None) -> None:
        self.model = model
        self.encoder = encoder or TextEncoder()

    def _assign(self, question: str) -> Assigned:
        [found] = assign(self.model, self.encoder.encode([question]))
        return found

    async def topic_of(self, question: str) -> Assigned:
        return await asyncio.to_thread(self._assign, question)


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
