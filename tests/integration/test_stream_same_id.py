"""One interaction id sent twice back to back, on the real broker and chDB: every stored row holds one
message's interaction with that message's own statements and verdicts, never a mix of the two.

A regenerated answer that reuses its interaction id is ordinary chatbot traffic. Half the ids are sent
as X (grounded) then Y (hallucinated), half as Y then X, each pair back to back in one batch, so both
messages of an id are in the join's buffer at once.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from tests.integration.helpers import deployment, jsonl, topic_of

N_IDS = 60
CONTEXT = "Paris is the capital of France. It lies on the Seine and has about two million inhabitants."
X = "Paris is the capital of France."
Y = "Berlin is the capital of Germany and lies on the Spree."

QUERY = """
import json
from schemas.settings import Settings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(Settings().clickhouse, migrate=False)
rows = store.query_sync(f"SELECT interaction_id, hallucination, payload FROM {store.db}.evaluations FINAL")
stmts = store.query_sync(
    f"SELECT interaction_id, pair, hypothesis FROM {store.db}.evaluation_statements_current"
)
print(json.dumps({"rows": rows, "statements": stmts}, default=str))
store.close()
"""


def interaction(i: int, answer: str) -> dict[str, Any]:
    return {
        "interaction_id": f"dup-{i}",
        "app": "capitals",
        "model": "m1",
        "question": "What is the capital of France?",
        "contexts": [CONTEXT],
        "answer": answer,
    }


def test_two_messages_with_one_id_never_mix(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dep = deployment(broker.url, tmp_path_factory.mktemp("same-id"))
    records: list[dict[str, Any]] = []
    for i in range(N_IDS):
        first, second = (X, Y) if i < N_IDS // 2 else (Y, X)
        records += [interaction(i, first), interaction(i, second)]
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        sent = asyncio.run(replay(dep.settings(), jsonl(records)))
        assert sent.sent == 2 * N_IDS
        on_topic = topic_of(dep, "evaluations", expect=2 * N_IDS, idle_s=5.0)
        wait_for(lambda: dep.evaluations() >= N_IDS, 90, "one row per id in ClickHouse")
    finally:
        assert worker.stop() == 0, worker.tail()

    # every message is judged on its own: both answers of each id reach the evaluations topic
    answers: dict[str, set[str]] = {}
    for e in on_topic:
        answers.setdefault(e["interaction_id"], set()).add(e["interaction"]["answer"])
        context = [pair for pair in e["pairs"] if pair["pair"] == "context_answer"]
        hypotheses = {h["hypothesis"] for pair in context for h in pair["hypotheses"]}
        assert hypotheses and all(h in e["interaction"]["answer"] for h in hypotheses), e["interaction_id"]
    assert all(seen == {X, Y} for seen in answers.values()), "each message of an id was evaluated"

    out = subprocess.run(
        [sys.executable, "-c", QUERY], env=dep.env(), cwd=dep.workdir, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    stored = json.loads(out.stdout)
    statements: dict[str, list[str]] = {}
    for s in stored["statements"]:
        if s["pair"] == "context_answer":
            statements.setdefault(s["interaction_id"], []).append(s["hypothesis"])
    assert len(stored["rows"]) == N_IDS
    for row in stored["rows"]:
        iid = row["interaction_id"]
        answer = json.loads(row["payload"])["interaction"]["answer"]
        assert answer in (X, Y), iid
        # the row's statements are its own answer's sentences, and its verdict is its own answer's
        own = statements.get(iid, [])
        assert own and all(h in answer for h in own), (iid, answer, own)
        assert int(row["hallucination"]) == (1 if answer == Y else 0), (iid, answer)
