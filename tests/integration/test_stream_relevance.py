"""Relevance (docs/method.md) in the stream: with pipeline.relevance on, every Evaluation the join emits
carries the embedding cosine of the question and the answer (offline all-MiniLM-L6-v2, the `embeddings`
extra)."""

from __future__ import annotations

import asyncio

import pytest

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from schemas.evaluation import Evaluation
from tests.integration.helpers import deployment, jsonl, topic_of

CONTEXT = "The museum opens at 10 am and closes at 6 pm every day except Monday."


def test_join_adds_relevance(broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("sentence_transformers")  # the `embeddings` extra; `make test` installs it
    env = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_PIPELINE__RELEVANCE": "true"}
    dep = deployment(broker.url, tmp_path_factory.mktemp("relevance"), extra_env=env)
    records = [
        {"interaction_id": "on-topic", "question": "When does the museum open?", "contexts": [CONTEXT],
         "answer": "The museum opens at 10 am."},
        {"interaction_id": "off-topic", "question": "When does the museum open?", "contexts": [CONTEXT],
         "answer": "Bananas are a good source of potassium."},
    ]  # fmt: skip
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), jsonl(records)))
        wait_for(lambda: dep.evaluations() >= 2, 180, "both interactions in ClickHouse")
    finally:
        assert worker.stop() == 0, worker.tail()
    got = {e["interaction_id"]: Evaluation.model_validate(e) for e in topic_of(dep, "evaluations", expect=2)}
    on, off = got["on-topic"].relevance, got["off-topic"].relevance
    assert on is not None and off is not None
    assert on > off + 0.2
    assert got["on-topic"].complete and "relevance" not in got["on-topic"].missing
