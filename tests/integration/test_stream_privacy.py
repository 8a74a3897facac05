"""privacy.mode all on a real worker (Tansu broker, chDB, the openai judge over HTTP to the fake OpenAI
server): no request to the judge, no row of any ClickHouse table, no dead letter and no line of the
worker's log holds a planted value, in the staged and the fused topology; one interaction whose NLI
keeps failing is dead-lettered, masked, and stored incomplete."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from schemas.deadletter import DeadLetter
from tests.fakes.openai_server import FakeOpenAIServer, failing_nli
from tests.fixtures.privacy import holds_planted, planted_interaction
from tests.integration.helpers import REPO, deployment, fake_judge, jsonl, topic_of

POISON = "zebra-poison"

# every table of the database, as JSON lines (chDB: one process a path, so a child reads it)
DUMP = """
import json, sys
from schemas.settings import Settings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(Settings().clickhouse, migrate=False)
tables = [r["name"] for r in store.query_sync("SELECT name FROM system.tables WHERE database = {db:String}",
                                              {"db": store.db})]
for table in tables:
    for row in store.query_sync(f"SELECT * FROM {store.db}.{table}"):
        print(json.dumps({"table": table, **row}, default=str))
"""


@pytest.fixture()
def fake() -> Iterator[FakeOpenAIServer]:
    yield from failing_nli(POISON)


def dump_tables(dep: LocalStack) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", DUMP], env=dep.env(), cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("topology", ["staged", "fused"])
def test_mode_all_leaves_no_planted_value_anywhere(
    topology: str, broker: TansuBroker, fake: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {
        "GROUNDWATCH_PRIVACY__MODE": "all",
        "GROUNDWATCH_KAFKA__TOPOLOGY": topology,
        **fake_judge(fake.base_url, quick_retries=True),
        "GROUNDWATCH_PIPELINE__PRONOUN_REPLACEMENT": "true",
        "GROUNDWATCH_KAFKA__JOIN_TIMEOUT_S": "4",
    }
    dep = deployment(broker.url, tmp_path_factory.mktemp(f"privacy-{topology}"), extra_env=env)
    good = [planted_interaction(f"p-{n}").model_dump(mode="json") for n in range(3)]
    bad = planted_interaction("bad-1").model_dump(mode="json")
    bad["answer"] = f"{bad['answer']} {POISON}."
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), jsonl([*good, bad])))
        expected = 4  # the interaction whose NLI fails is stored incomplete, in either topology
        wait_for(lambda: dep.evaluations() >= expected, 120, "evaluations in ClickHouse")
        wait_for(lambda: (dep.status().counts.get("dead_letters", 0) if dep.status() else 0) >= 1, 60,
                 "the dead letter in ClickHouse")  # fmt: skip
    finally:
        assert worker.stop() == 0, worker.tail()

    bodies = json.dumps(fake.stats.bodies)
    assert "<EMAIL_1>" in bodies and not holds_planted(bodies)
    letters = [DeadLetter.model_validate(d) for d in topic_of(dep, "deadletter", expect=1)]
    assert [d.interaction_id for d in letters] == ["bad-1"]
    assert not holds_planted(json.dumps([d.model_dump(mode="json") for d in letters]))
    assert "<EMAIL_1>" in (letters[0].original or "")  # replayable, masked
    rows = dump_tables(dep)
    tables = {str(r["table"]) for r in rows}
    assert {"evaluations", "evaluation_statements", "dead_letters"} <= tables
    assert not holds_planted(json.dumps(rows, default=str))
    log = (dep.workdir / "worker.log").read_text(encoding="utf-8", errors="replace")
    assert "dead letter" in log and not holds_planted(log)
