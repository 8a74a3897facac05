"""Sampling in the stream, on the real broker and a chDB worker: with a default rate of 0.5 and an
always-judge rule (negative feedback), each interaction is judged or stored unjudged exactly as the pure
decision says (the same hash in the test process and the worker), every one is stored and counted, and the
windows count received, judged and skipped by reason."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from pipeline.sampling import Sampler, load_sampling_rules
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.sampling import SamplingRules
from tests.integration.helpers import deployment, fake_judge, jsonl, topic_of

RULES = """
rules:
  - name: thumbs-down
    action: judge
    when:
      metadata: {feedback: negative}
"""
CONTEXT = "The museum opens at 10 am and closes at 6 pm every day except Monday."
N = 40

QUERY = """
import json, sys
from schemas.settings import Settings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(Settings().clickhouse, migrate=False)
rows = store.query_sync(f"SELECT interaction_id, judged, skip_reason, judge_calls, context_entailment "
                        f"FROM {store.db}.evaluations FINAL")
print(json.dumps(rows, default=str))
store.close()
"""


def records() -> list[dict[str, Any]]:
    out = []
    for i in range(N):
        answer = "The museum opens at 10 am." if i % 2 else "The museum opens at 9 am on Mondays."
        question = "When does the museum open?"
        record: dict[str, Any] = {
            "interaction_id": f"s-{i}", "app": "museum-bot", "model": "m", "question": question,
            "contexts": [CONTEXT], "answer": answer,
        }  # fmt: skip
        if i % 4 == 0:
            record["feedback"] = "negative"
        out.append(record)
    return out


def stored_rows(dep: LocalStack) -> list[dict[str, Any]]:
    """The evaluations table, read by a child process (chDB: one process per path)."""
    out = subprocess.run(
        [sys.executable, "-c", QUERY], env=dep.env(), cwd=dep.workdir, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


@pytest.mark.parametrize("topology", ["staged", "fused"])
def test_sample_rate_and_always_judge_rule(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory, topology: str
) -> None:
    workdir = tmp_path_factory.mktemp(f"sampling-{topology}")
    rules_file = workdir / "sampling.yaml"
    rules_file.write_text(RULES, encoding="utf-8")
    env = {
        "GROUNDWATCH_SAMPLING__DEFAULT_RATE": "0.5",
        "GROUNDWATCH_SAMPLING__RULES_FILE": str(rules_file),
        "GROUNDWATCH_KAFKA__TOPOLOGY": topology,
    }
    dep = deployment(broker.url, workdir, extra_env=env)
    sent = records()
    sampler = Sampler(load_sampling_rules(rules_file), default_rate=0.5)
    expected = {r["interaction_id"]: sampler.decide(Interaction.model_validate(r)) for r in sent}
    judged_ids = {i for i, d in expected.items() if d.judge}
    assert 10 < len(judged_ids) < N  # some sampled out, the ten thumbs-down always in
    thumbs_down = {r["interaction_id"] for r in sent if r.get("feedback") == "negative"}
    rate_alone = Sampler(SamplingRules(), default_rate=0.5)
    assert thumbs_down <= judged_ids
    assert any(not rate_alone.decide(Interaction.model_validate(r)).judge for r in sent if r.get("feedback"))

    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), jsonl(sent)))
        wait_for(lambda: dep.evaluations() >= N, 120, "every interaction in ClickHouse")
        evaluations = [Evaluation.model_validate(e) for e in topic_of(dep, "evaluations", expect=N)]
    finally:
        assert worker.stop() == 0, worker.tail()

    # on the topic: one Evaluation per interaction, judged or not as the pure decision says
    assert sorted(e.interaction_id for e in evaluations) == sorted(expected)
    for e in evaluations:
        decision = expected[e.interaction_id]
        assert e.judged == decision.judge, e.interaction_id
        if e.judged:
            assert e.skip_reason is None and e.context_entailment is not None
        else:
            assert e.skip_reason == decision.reason == "sampled_out:default"
            assert e.context_entailment is None and e.calls == [] and e.judge_calls == 0

    # stored: every interaction, with its judged flag and skip reason
    rows = {r["interaction_id"]: r for r in stored_rows(dep)}
    assert set(rows) == set(expected)
    assert {i for i, r in rows.items() if int(r["judged"]) == 1} == judged_ids
    assert all(r["skip_reason"] == "sampled_out:default" for i, r in rows.items() if i not in judged_ids)
    assert all(r["context_entailment"] is None for i, r in rows.items() if i not in judged_ids)

    # the windows (closed on the graceful stop at the latest): received, judged, skipped by reason; the
    # rates are over the judged interactions only
    windows = [w for w in dep.report().windows if w.app == "museum-bot"]
    assert sum(w.count for w in windows) == N
    assert sum(w.judged for w in windows) == len(judged_ids)
    by_reason: Counter[str] = Counter()
    for w in windows:
        by_reason.update(w.skipped_by_reason)
        assert w.count == w.judged + w.skipped
        assert w.context_scored <= w.judged
    assert by_reason == {"sampled_out:default": N - len(judged_ids)}
    assert sum(w.context_scored for w in windows) == len(judged_ids)


def test_a_spent_judge_budget_skips_the_app_until_the_day_ends(
    broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The worker charges the budget from the evaluations it writes: once the first interactions of app
    `bot` (fake judge over HTTP, priced at 1 USD per 1K tokens) cost more than its day's budget, its next
    ones are stored unjudged (budget:cost_per_day); another app without a budget is still judged."""
    from tests.fakes.openai_server import FakeOpenAIServer

    workdir = tmp_path_factory.mktemp("budget")
    rules_file = workdir / "sampling.yaml"
    rules_file.write_text("budgets:\n  - {app: bot, cost_per_day_usd: 0.01}\n", encoding="utf-8")

    def batch(app: str, first: int, n: int) -> list[dict[str, Any]]:
        return [
            {"interaction_id": f"{app}-{i}", "app": app, "model": "m", "question": "When does it open?",
             "contexts": [CONTEXT], "answer": f"The museum opens at 10 am, said guide number {i}."}
            for i in range(first, first + n)
        ]  # fmt: skip

    with FakeOpenAIServer() as fake:
        env = {
            "GROUNDWATCH_SAMPLING__RULES_FILE": str(rules_file),
            **fake_judge(fake.base_url),
            "GROUNDWATCH_JUDGE__PRICES": '{"fake-model": {"input_per_1k": 1.0, "output_per_1k": 1.0}}',
        }
        dep = deployment(broker.url, workdir, extra_env=env)
        worker = dep.start_worker()
        try:
            worker.wait_ready()
            asyncio.run(replay(dep.settings(), jsonl(batch("bot", 0, 2))))
            wait_for(lambda: dep.evaluations() >= 2, 90, "the first two in ClickHouse")
            requests_before = fake.stats.requests
            asyncio.run(replay(dep.settings(), jsonl(batch("bot", 2, 4) + batch("other", 0, 2))))
            wait_for(lambda: dep.evaluations() >= 8, 90, "all eight in ClickHouse")
            evaluations = {
                e["interaction_id"]: Evaluation.model_validate(e)
                for e in topic_of(dep, "evaluations", expect=8)
            }
        finally:
            assert worker.stop() == 0, worker.tail()

    first = [evaluations[f"bot-{i}"] for i in range(2)]
    assert all(e.judged and e.cost_usd > 0.01 for e in first)  # each alone spends the day's budget
    later = [evaluations[f"bot-{i}"] for i in range(2, 6)]
    assert [(e.judged, e.skip_reason) for e in later] == [(False, "budget:cost_per_day")] * 4
    assert all(evaluations[f"other-{i}"].judged for i in range(2))
    assert fake.stats.requests > requests_before  # only the other app's interactions reached the judge
    rows = {r["interaction_id"]: r for r in stored_rows(dep)}
    assert sorted(i for i, r in rows.items() if r["skip_reason"] == "budget:cost_per_day") == [
        f"bot-{i}" for i in range(2, 6)
    ]
