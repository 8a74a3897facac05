"""A judge that keeps failing (after its retries) sends the message to deadletter with stage and error,
and the interaction is stored incomplete, in the fused and the staged topology. The OpenAI path runs over
real HTTP to the fake OpenAI-compatible server (tests/fakes), whose NLI answers fail for one
interaction."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from schemas.deadletter import DeadLetter
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from tests.fakes.openai_server import FakeOpenAIServer, failing_nli
from tests.integration.helpers import deployment, fake_judge, jsonl, topic_of

POISON = "zebra-poison"
CONTEXT = "The library opens at 9 am and closes at 5 pm on weekdays."


@pytest.fixture()
def fake() -> Iterator[FakeOpenAIServer]:
    yield from failing_nli(POISON)


@pytest.mark.parametrize("topology", ["fused", "staged"])
def test_judge_errors_go_to_deadletter_and_the_interaction_is_stored_incomplete(
    topology: str, broker: TansuBroker, fake: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {
        **fake_judge(fake.base_url, quick_retries=True),
        "GROUNDWATCH_KAFKA__JOIN_TIMEOUT_S": "4",
        "GROUNDWATCH_KAFKA__TOPOLOGY": topology,
        # the windows close at the stop, once both rows are stored (an idle close while the bad one is
        # still retried would leave its window's rewrite to a touch the stop may not read: the next start's)
        "GROUNDWATCH_WINDOW__IDLE_CLOSE_SECONDS": "3600",
    }
    dep = deployment(broker.url, tmp_path_factory.mktemp(f"judge-errors-{topology}"), extra_env=env)
    records = [
        {"interaction_id": "ok-1", "question": "When does the library open?", "contexts": [CONTEXT],
         "answer": "The library opens at 9 am."},
        {"interaction_id": "bad-1", "question": "When does the library close?", "contexts": [CONTEXT],
         "answer": f"The library closes at 5 pm {POISON}."},
    ]  # fmt: skip
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), jsonl(records)))
        wait_for(lambda: dep.evaluations() >= 2, 90, "both interactions in ClickHouse")
    finally:
        assert worker.stop() == 0, worker.tail()

    letters = [DeadLetter.model_validate(d) for d in topic_of(dep, "deadletter", expect=1)]
    assert [(d.stage, d.interaction_id) for d in letters] == [("nli", "bad-1")]
    assert letters[0].error_type == "JudgeError" and letters[0].error
    # the message that could not be judged: the interaction (fused), the Converted (staged)
    assert ('"interaction"' in letters[0].payload) == (topology == "staged") and POISON in letters[0].payload
    assert letters[0].original is not None  # the interaction itself, to replay onto interactions
    assert Interaction.model_validate_json(letters[0].original).interaction_id == "bad-1"

    evaluations = {
        e["interaction_id"]: Evaluation.model_validate(e) for e in topic_of(dep, "evaluations", expect=2)
    }
    assert evaluations["ok-1"].complete and evaluations["ok-1"].judge_calls > 0
    bad = evaluations["bad-1"]
    assert not bad.complete and bad.missing == ["nli"] and bad.context_entailment is None
    report = dep.report()
    assert report.counts["evaluations"] == 2
    assert sum(w.incomplete for w in report.windows) == 1
