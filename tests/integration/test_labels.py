"""People's labels end to end on the real broker and chDB: labels sent to the labels topic are stored
(a bad one dead-lettered with its reason; a label of an evaluator of the evaluators file taken, one of an
evaluator it lacks dead-lettered), and the judge's agreement measured online equals the offline
measurement of `groundwatch eval` on the same cases."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from streams.topics import bootstrap_servers, ensure_topics
from tests.integration.helpers import deployment, jsonl, topic_of

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
CONTEXT = "The museum opens at 10 am and closes at 6 pm every day except Monday."

QUERY = """
import json
from schemas.settings import Settings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(Settings().clickhouse, migrate=False)
sql = (f"SELECT interaction_id, kind, reviewer, value FROM {store.db}.labels FINAL "
       "ORDER BY interaction_id, kind, reviewer")
print(json.dumps(store.query_sync(sql), default=str))
store.close()
"""


async def _send(dep: LocalStack, values: list[bytes]) -> None:
    settings = dep.settings()
    await ensure_topics(settings.kafka)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(settings.kafka.broker))
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(f"{dep.prefix}labels", value, key=b"k")
    finally:
        await producer.stop()


def test_labels_topic_stores_labels_and_dead_letters_bad_ones(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    rule = {"kind": "grounded", "values": {"up": 1, "down": 0, "1": 1, "-1": 0}}
    workdir = tmp_path_factory.mktemp("labels")
    evaluators = workdir / "evaluators.yaml"
    evaluators.write_text(
        "evaluators:\n  - {name: nine_am, version: '1', kind: pattern, field: answer, words: ['9 am']}\n",
        encoding="utf-8",
    )
    dep = deployment(
        broker.url,
        workdir,
        extra_env={
            "GROUNDWATCH_LABELS__END_USER_FEEDBACK": json.dumps(rule),
            "GROUNDWATCH_EVALUATORS__FILE": str(evaluators),
        },
    )
    # end users' thumbs: "Down " and 1 are in the rule, "meh" is not
    thumbs = [{"feedback": "Down "}, {"feedback": 1}, {"feedback": "meh"}]
    interactions = [
        {"interaction_id": f"l-{i}", "app": "museum-bot", "model": "m", "question": "When does it open?",
         "contexts": [CONTEXT], "answer": "It opens at 10 am." if i else "It opens at 9 am.",
         "metadata": thumbs[i]}
        for i in range(3)
    ]  # fmt: skip

    def label(iid: str, value: Any, reviewer: str = "ann", kind: str = "grounded") -> bytes:
        data = {"interaction_id": iid, "kind": kind, "value": value, "reviewer": reviewer}
        return json.dumps(data).encode()

    good = [label("l-0", 0), label("l-1", 1), label("l-2", 1), label("l-2", 0, reviewer="bob"),
            label("l-0", 1, kind="custom.nine_am")]  # fmt: skip
    bad = [label("l-1", 2), b"\xff\xfe not json", label("l-1", 0, kind="custom.nine_pm")]
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), jsonl(interactions)))
        asyncio.run(_send(dep, good + bad + [label("l-0", 0)]))  # the last: a redelivery of the first
        wait_for(lambda: dep.evaluations() >= 3, 90, "the interactions in ClickHouse")
        letters = topic_of(dep, "deadletter", expect=3)
    finally:
        assert worker.stop() == 0, worker.tail()
    assert sorted(letter["stage"] for letter in letters) == ["validate"] * 3
    assert any("value" in letter["error"] for letter in letters)
    unknown = "custom.nine_pm: no such evaluator in the evaluators file"
    assert any(unknown in letter["error"] for letter in letters)
    assert {letter["source_topic"] for letter in letters} == {f"{dep.prefix}labels"}
    out = subprocess.run(
        [sys.executable, "-c", QUERY], env=dep.env(), cwd=dep.workdir, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    rows = [(r["interaction_id"], r["kind"], r["reviewer"], int(r["value"])) for r in json.loads(out.stdout)]
    assert rows == [
        ("l-0", "custom.nine_am", "ann", 1), ("l-0", "grounded", "ann", 0),
        ("l-0", "grounded", "end_user", 0),
        ("l-1", "grounded", "ann", 1), ("l-1", "grounded", "end_user", 1),
        ("l-2", "grounded", "ann", 1), ("l-2", "grounded", "bob", 0),
    ]  # fmt: skip


def _groundwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWATCH_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "groundwatch.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_online_agreement_equals_the_offline_measurement(tmp_path: Path) -> None:
    """demo --data F, labels import F, agreement --json: the grounded balanced accuracy equals
    `groundwatch eval F --judge lexical` at the shipped threshold on the same cases."""
    lines = [json.loads(x) for x in SAMPLE.read_text(encoding="utf-8").splitlines() if x.strip()]
    grounded = [{**r, "app": "mine", "model": "m"} for r in lines if "grounded" in (r.get("labels") or {})][
        :60
    ]
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in grounded), encoding="utf-8")
    work = tmp_path / "demo"
    demo = _groundwatch(
        "demo", "--data", str(data), "--judge", "lexical", "--no-serve", "--workdir", str(work),
        "--days", "1", cwd=tmp_path,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-3000:] + demo.stdout[-3000:]
    url = f"chdb://{work / 'chdb'}"
    imported = _groundwatch("labels", "import", str(data), "--clickhouse", url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert f"{len(grounded)} labels of {len(grounded)} interactions imported" in imported.stdout
    online = _groundwatch("agreement", "--json", "--since", "30d", "--clickhouse", url, cwd=tmp_path)
    assert online.returncode == 0, online.stderr
    report = json.loads(online.stdout)
    blocks = [b for b in report["apps"] if b["kind"] == "grounded"]
    cases = sum(b["agreement"]["cases"] for b in blocks)
    offline = _groundwatch(
        "eval", str(data), "--judge", "lexical", "--out", str(tmp_path / "r.json"), cwd=tmp_path
    )
    assert offline.returncode == 0, offline.stderr
    primary = json.loads((tmp_path / "r.json").read_text())["labels"]["grounded"]["primary"]
    assert cases == primary["n"] == len(grounded)
    # one app/model in the file: its online balanced accuracy is the offline one
    [block] = blocks
    assert block["agreement"]["balanced_accuracy"]["value"] == pytest.approx(
        primary["balanced_accuracy"], abs=0.005
    )
