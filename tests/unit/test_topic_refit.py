"""The worker's refit of the topics (streams/topic_models.py): on the questions stored in ClickHouse (chDB),
in a child process with the real packaged encoder, only by the owner of the key ``topics``, on the
worker's clock (advanced here, never slept), ids kept across refits; a refit that runs too long is
killed and tried again later; a model read twice or an older one changes nothing."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from groundwatch.local.supervise import wait_for
from pipeline.clock import ManualClock
from pipeline.embeddings import TextEncoder
from pipeline.topic_assignment import TopicAssigner
from schemas.settings import TopicsSettings
from schemas.topic_model import TopicModel
from streams.clickhouse.store import ClickHouseStore
from streams.ownership import Ownership, partition_of
from streams.topic_models import TOPICS_KEY, TopicRefitter
from tests.fixtures import messages

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
PARTITIONS = 4
SUBJECTS = {
    "tires": ["How do I check the tire pressure?", "What tire pressure is right for the front tires?",
              "Where is the tire pressure label?", "How often should tire pressure be checked?"],
    "radio": ["How do I pair my phone with the radio?", "Why does the radio lose the bluetooth phone?",
              "How do I play music from my phone on the radio?", "Can the radio pair two phones?"],
    "brakes": ["Why do the brakes squeal?", "When should the brake pads be replaced?",
               "Why does the brake pedal feel soft?", "How is the parking brake released?"],
}  # fmt: skip


def store_questions(store: ClickHouseStore, per_subject: int, at: datetime) -> None:
    rows = []
    for subject, questions in SUBJECTS.items():
        for k in range(per_subject):
            interaction = messages.interaction(
                interaction_id=f"{subject}-{at:%H%M}-{k}", timestamp=at - timedelta(minutes=k + 1),
                question=questions[k % len(questions)],
            )  # fmt: skip
            rows.append(messages.evaluation(interaction))
    store.insert_evaluations_sync(rows)


def refitter(
    store: ClickHouseStore, clock: ManualClock, owned: bool = True, **topics: object
) -> tuple[TopicRefitter, list[TopicModel]]:
    settings = TopicsSettings.model_validate(
        {"max_topics": 3, "min_topic_size": 5, "refit_every": 3600, **topics}
    )
    ownership = Ownership("touches", lambda: PARTITIONS)
    mine = partition_of(TOPICS_KEY, PARTITIONS)
    ownership.assign([mine] if owned else [p for p in range(PARTITIONS) if p != mine])
    published: list[TopicModel] = []

    async def publish(model: TopicModel) -> None:
        published.append(model)

    assigner = TopicAssigner(None, TextEncoder())
    return TopicRefitter(settings, assigner, store, ownership, publish, clock), published


async def test_the_owner_fits_first_then_refits_when_due_and_topics_keep_their_ids(
    store: ClickHouseStore,
) -> None:
    clock = ManualClock(NOW)
    store_questions(store, 12, NOW)
    refit, published = refitter(store, clock)
    first = await refit.tick()
    assert first is not None and published == [first] and refit.assigner.model == first
    assert first.version == 1 and len(first.topics) == 3 and first.fitted_at == NOW
    assert await refit.tick() is None  # not due yet
    clock.advance(3600)
    store_questions(store, 12, clock.now())
    second = await refit.tick()
    assert second is not None and second.version == 2 and published == [first, second]
    assert {t.id for t in second.topics} == {t.id for t in first.topics}  # the same subjects, the same ids
    found = await refit.assigner.topic_of("Is my tire pressure too low?")
    assert found.version == 2 and found.topic == (await refit.assigner.topic_of(SUBJECTS["tires"][0])).topic
    # a model read again from the topic, or an older one, changes nothing
    assert not refit.assigner.use(first) and not refit.assigner.use(second)
    await refit.assigner.aclose()


async def test_only_the_owner_refits_and_too_few_questions_wait_a_whole_period(
    store: ClickHouseStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(NOW)
    store_questions(store, 3, NOW)  # 9 questions: fewer than 2 x min_topic_size
    others, published = refitter(store, clock, owned=False)
    assert await others.tick() is None and others.tried_at is None  # not this worker's to do
    refit, published = refitter(store, clock)
    with caplog.at_level(logging.INFO, logger="streams.topic_models"):
        assert await refit.tick() is None and refit.tried_at == NOW
    assert "a fit needs 10 stored questions, 9" in caplog.text
    assert refit.poll_seconds == 30.0 and not refit.due()
    clock.advance(30)  # without a model, a first fit is looked for at every poll
    assert refit.due() and published == []
    refit.assigner.model = TopicModel(
        version=1,
        fitted_at=NOW,
        method="kmeans",
        questions=0,
        other=0,
        min_similarity=0.2,
        next_id=1,
        topics=[],
    )
    refit.tried_at = NOW
    assert not refit.due()  # with one, a refit waits refit_every from the model and from the attempt
    clock.advance(3600)
    assert refit.due()


async def test_a_refit_past_its_timeout_is_killed_and_the_worker_goes_on(
    store: ClickHouseStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(NOW)
    store_questions(store, 12, NOW)
    refit, published = refitter(store, clock, refit_timeout_seconds=0.05)  # spawning alone takes longer
    with caplog.at_level(logging.WARNING, logger="streams.topic_models"):
        assert await refit.tick() is None
    assert "failed: still running after 0.05 s" in caplog.text
    assert published == [] and refit.assigner.model is None and refit.tried_at == NOW


REFIT_SCRIPT = """
import asyncio
from datetime import UTC, datetime
from pipeline.topic_refit import refit
from schemas.settings import TopicsSettings
texts = [f"question {i} about the tire pressure of car {i}" for i in range(4000)]
asyncio.run(refit(texts, TopicsSettings(), None, datetime.now(UTC)))
"""


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid and stat[0] != "Z":
                found.append(int(entry.name))
    return found


def spawned(pid: int) -> list[int]:
    """The pool's worker among ``pid``'s children (not multiprocessing's resource tracker)."""
    out = []
    for child in children_of(pid):
        try:
            args = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing.spawn" in args or b"spawn_main" in args:
            out.append(child)
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time ``pid`` has used (user + system), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal")
def test_a_worker_killed_mid_refit_leaves_no_refit_process_behind() -> None:
    """kill -9 of the process refitting: its child, busy importing the encoder and embedding (not waiting
    on its pipe, where it would see its parent go), is killed with it."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    parent = subprocess.Popen([sys.executable, "-c", REFIT_SCRIPT], env=env, cwd=repo)
    try:
        wait_for(lambda: bool(spawned(parent.pid)), 60, "the refit's child process")
        children = children_of(parent.pid)
        wait_for(lambda: any(cpu_seconds(c) > 3.0 for c in spawned(parent.pid)), 120, "the refit at work")
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
    wait_for(lambda: all(gone(pid) for pid in children), 30, "the refit's child processes to end")
