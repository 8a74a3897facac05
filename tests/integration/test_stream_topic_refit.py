"""Topics in a deployed worker, on a real Tansu broker and chDB: a worker with ``topics.refit_every`` and no
model file fits the topics of the questions it stored, sends the model to the ``topic_models`` topic, and
its judging process (``kafka.processes`` 2: the evaluator runs there, not where the refit ran) assigns the
interactions that come after by it; those judged before keep no topic. A message on that topic that is
not a topic model is skipped."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from streams.topics import bootstrap_servers
from tests.fixtures.wall_clock import recent
from tests.integration.helpers import deployment, jsonl, topic_of

SUBJECTS = {
    "tires": ["How do I check the tire pressure?", "What tire pressure is right for the front tires?",
              "Where is the tire pressure label?"],
    "radio": ["How do I pair my phone with the radio?", "Why does the radio lose the bluetooth phone?",
              "How do I play music from my phone on the radio?"],
    "brakes": ["Why do the brakes squeal?", "When should the brake pads be replaced?",
               "Why does the brake pedal feel soft?"],
}  # fmt: skip
QUERY = """
import json
from schemas.settings import Settings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(Settings().clickhouse, migrate=False)
rows = store.query_sync(f"SELECT interaction_id, dimensions FROM {store.db}.evaluations FINAL")
print(json.dumps(rows, default=str))
store.close()
"""


def records(batch: str, per_subject: int) -> list[dict[str, Any]]:
    """Questions of three subjects, stamped a few minutes ago (``recent``: the worker checks event
    times against its wall clock, and a refit reads the questions stored over ``refit_over`` before now)."""
    at = recent(minutes=5).isoformat()
    return [
        {"interaction_id": f"{batch}-{subject}-{k}", "timestamp": at, "app": "car-bot", "model": "m",
         "question": questions[k % len(questions)], "contexts": ["The manual says so."],
         "answer": "See page 4."}
        for subject, questions in SUBJECTS.items()
        for k in range(per_subject)
    ]  # fmt: skip


async def send(broker_url: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(broker_url))
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"topics")
    finally:
        await producer.stop()


def models(dep: LocalStack) -> list[dict[str, Any]]:
    """The topic models on the deployment's topic_models topic (its other messages left out)."""
    return [m for m in topic_of(dep, "topic_models", idle_s=2.0) if "topics" in m]


def stored_dimensions(dep: LocalStack) -> dict[str, dict[str, str]]:
    """Each stored interaction's dimensions, read by a child process (chDB: one process per path)."""
    out = subprocess.run(
        [sys.executable, "-c", QUERY], env=dep.env(), cwd=dep.workdir, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return {r["interaction_id"]: r["dimensions"] for r in json.loads(out.stdout)}


def test_a_worker_fits_topics_on_what_it_stored_and_its_judging_process_assigns_by_them(
    broker: TansuBroker, tmp_path: Path
) -> None:
    env = {
        "GROUNDWATCH_KAFKA__PROCESSES": "2",
        "GROUNDWATCH_TOPICS__REFIT_EVERY": "3600",  # the first fit is looked for every 30 s until made
        "GROUNDWATCH_TOPICS__MAX_TOPICS": "3",
        "GROUNDWATCH_TOPICS__MIN_TOPIC_SIZE": "5",
    }
    dep = deployment(broker.url, tmp_path, extra_env=env)
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(send(dep.broker_url, dep.prefix + "topic_models", b'{"version": "not a model"}'))
        dep.replay(jsonl(records("before", 8)))
        dep.wait_for_evaluations(24, timeout_s=180)
        # the first fit: looked for every 30 s, then a child process embeds and fits (slower under load)
        wait_for(lambda: len(models(dep)) == 1, 240, "the first topic model on topic_models", interval=2.0)
        [model] = models(dep)
        dep.replay(jsonl(records("after", 4)))
        dep.wait_for_evaluations(36, timeout_s=180)
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
    assert model["version"] == 1 and len(model["topics"]) == 3 and model["questions"] == 24
    dimensions = stored_dimensions(dep)
    before = [d for iid, d in dimensions.items() if iid.startswith("before-")]
    after = {iid: d for iid, d in dimensions.items() if iid.startswith("after-")}
    assert len(before) == 24 and not any("topic" in d for d in before)  # judged before the first fit
    assert len(after) == 12 and all(d.get("topic_model") == "v1" for d in after.values())
    by_subject: dict[str, set[str]] = {}
    for iid, d in after.items():
        by_subject.setdefault(iid.split("-")[1], set()).add(d["topic"])
    assert all(len(topics) == 1 for topics in by_subject.values())  # a subject is one topic
    assert len(set().union(*by_subject.values())) == 3, by_subject
