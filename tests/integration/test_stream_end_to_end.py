"""The stream end to end on a real Tansu broker and chDB: worker subprocess, replay, ClickHouse, topics.

One worker run (module fixture) carries sample traffic, two synthetic apps for the alert rule, and
malformed messages; the tests below each check one property of that run.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from groundwatch.local.stack import LocalStack
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from groundwatch.trend_report import Report
from schemas.deadletter import DeadLetter
from schemas.evaluation import Evaluation
from schemas.latency import histogram, quantile
from schemas.window import WindowAggregate
from tests.fixtures.receivers import WebhookReceiver
from tests.integration.helpers import REPO, deployment, jsonl, topic_of
from tests.integration.traffic import GROUNDED, HALLUCINATED, synthetic

SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
N_SAMPLE = 40

RULES = """
rules:
  - name: hallucination-high
    metric: hallucination_rate
    op: ">"
    threshold: 0.5
    windows: 2
    min_interactions: 4
    cooldown_seconds: 0
"""


MALFORMED = [
    "this is not json",
    json.dumps({"interaction_id": "no-answer", "question": "Where?"}),
    json.dumps({"interaction_id": "too-long", "question": "Q?", "answer": "x" * 60_000}),
]


@dataclass
class Run:
    deployment: LocalStack
    expected_ids: set[str]
    evaluations: list[dict[str, Any]]
    deadletters: list[dict[str, Any]]
    alerts_topic: list[dict[str, Any]]
    report: Report
    log: str
    webhook: list[dict[str, Any]]


@pytest.fixture(scope="module")
def run(broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory) -> Run:
    workdir = tmp_path_factory.mktemp("e2e")
    rules = workdir / "rules.yaml"
    rules.write_text(RULES)
    hook = WebhookReceiver()
    env = {
        "GROUNDWATCH_ALERTS__RULES_FILE": str(rules),
        "GROUNDWATCH_ALERTS__WEBHOOK_URL": hook.url,
        "GROUNDWATCH_ALERTS__WEBHOOK_BACKOFF_S": "0.05",
    }
    dep = deployment(broker.url, workdir, extra_env=env)
    sample = [line for line in SAMPLE.read_text().splitlines() if line.strip()][:N_SAMPLE]
    good = synthetic("grounded-app", GROUNDED, 12)
    bad = synthetic("hallucinating-app", HALLUCINATED, 12)
    lines = sample + jsonl(good) + jsonl(bad) + MALFORMED
    expected = {json.loads(s)["id"] for s in sample} | {r["interaction_id"] for r in good + bad}

    worker = dep.start_worker()
    try:
        worker.wait_ready()
        sent = asyncio.run(replay(dep.settings(), lines))
        assert sent.sent == len(lines)
        wait_for(lambda: dep.evaluations() >= len(expected), 120, "every evaluation in ClickHouse")

        # windows close 1 s after the watermark passes (2 s windows) or 2 s after their last row
        def windows_done() -> bool:
            status = dep.status()
            return status is not None and status.windows_written >= 1

        wait_for(windows_done, 60, "windows to close")
        evaluations = topic_of(dep, "evaluations", expect=len(expected))
        deadletters = topic_of(dep, "deadletter", expect=len(MALFORMED))
        # the graceful stop writes the windows still open and evaluates their alerts (Resources.finish)
    finally:
        code = worker.stop()
        hook.close()
    assert code == 0, worker.tail()
    alerts_topic = topic_of(dep, "alerts", idle_s=2)
    log = worker.log.read_text()
    return Run(dep, expected, evaluations, deadletters, alerts_topic, dep.report(), log, hook.bodies)


def test_one_row_and_one_evaluation_per_interaction(run: Run) -> None:
    assert run.report.counts["evaluations"] == len(run.expected_ids)
    ids = [e["interaction_id"] for e in run.evaluations]
    assert sorted(ids) == sorted(run.expected_ids), "each interaction exactly once on the evaluations topic"
    for raw in run.evaluations:
        evaluation = Evaluation.model_validate(raw)
        assert evaluation.complete, evaluation.missing
        assert evaluation.judge == "lexical"


def _recompute(rows: list[Evaluation], size_s: int) -> dict[tuple[str, str, datetime], dict[str, Any]]:
    """Independent of streams.windows: group by (app, model, window) and compute the figures directly."""
    groups: dict[tuple[str, str, datetime], list[Evaluation]] = defaultdict(list)
    for e in rows:
        ts = e.timestamp.astimezone(UTC)
        epoch = ts.timestamp()
        start = datetime.fromtimestamp(math.floor(epoch / size_s) * size_s, tz=UTC)
        groups[(e.app, e.model, start)].append(e)
    out = {}
    for key, es in groups.items():
        # judge latency quantiles are over individual calls that reached a model (none for lexical)
        lat = sorted(c.latency_ms for e in es for c in e.calls
                     if not c.cached and c.attempts > 0 and c.judge != "lexical")  # fmt: skip

        def pct(q: float, lat: list[float] = lat) -> float | None:
            return quantile(histogram(lat), q)  # the one definition (schemas.latency)

        answered = [e for e in es if e.hallucination is not None]
        halluc = sum(1 for e in answered if e.hallucination)

        def mean(values: list[Any]) -> float | None:
            known = [v for v in values if v is not None]
            return sum(known) / len(known) if known else None

        out[key] = {
            "count": len(es),
            "answered": len(answered),
            "hallucinations": halluc,
            "hallucination_rate": halluc / len(answered) if answered else None,
            "mean_context_entailment": mean([e.context_entailment for e in es]),
            "mean_ground_truth_entails_answer": mean([e.ground_truth_entails_answer for e in es]),
            "mean_answer_entails_ground_truth": mean([e.answer_entails_ground_truth for e in es]),
            "answer_refusal_rate": mean([e.answer_refusal for e in es]),
            "ground_truth_refusal_rate": mean([e.ground_truth_refusal for e in es]),
            "input_tokens": sum(e.input_tokens for e in es),
            "output_tokens": sum(e.output_tokens for e in es),
            "cost_usd": sum(e.cost_usd for e in es),
            "judge_latency_p50_ms": pct(0.5),
            "judge_latency_p95_ms": pct(0.95),
            "incomplete": sum(1 for e in es if not e.complete),
        }
    return out


def test_window_figures_equal_a_recomputation_from_the_rows(run: Run) -> None:
    rows = [Evaluation.model_validate(e) for e in run.evaluations]
    expected = _recompute(rows, size_s=2)
    got: dict[tuple[str, str, datetime], WindowAggregate] = {
        (w.app, w.model, w.window_start.replace(tzinfo=UTC)): w for w in run.report.windows
    }
    assert set(got) == set(expected)
    assert sum(w.count for w in got.values()) == len(run.expected_ids)
    for key, want in expected.items():
        w = got[key]
        # the lexical judge calls no model: there is no latency to recompute, and the window has none
        assert want.pop("judge_latency_p50_ms") is None and want.pop("judge_latency_p95_ms") is None
        assert (w.judge_latency_p50_ms, w.judge_latency_p95_ms) == (None, None), key
        for name, value in want.items():
            actual = getattr(w, name)
            if value is None:
                assert actual is None, (key, name)
            else:
                assert actual == pytest.approx(value, rel=1e-9, abs=1e-9), (key, name)
    # what is compared are figures, not absences: windows with judged answers and hallucinations
    assert any(want["mean_context_entailment"] is not None for want in expected.values())
    assert any(want["hallucinations"] > 0 for want in expected.values())


def test_alert_fires_on_the_hallucinating_stream_only(run: Run) -> None:
    fired = {(a.app, a.rule) for a in run.report.alerts}
    assert ("hallucinating-app", "hallucination-high") in fired
    assert not [a for a in run.report.alerts if a.app == "grounded-app"]
    topic_ids = {a["alert_id"] for a in run.alerts_topic}
    assert {a.alert_id for a in run.report.alerts} == topic_ids
    for alert in run.report.alerts:
        assert alert.value > 0.5 and alert.interactions >= 4
        assert alert.window_end - alert.window_start == timedelta(seconds=4)  # 2 windows of 2 s
    # the webhook got each alert as Slack-style JSON, after a retry of its first (503) answer
    texts = [b["text"] for b in run.webhook]
    assert len(texts) == len(run.report.alerts) + 1 and texts[0] == texts[1]
    assert {a.message for a in run.report.alerts} == set(texts)


def test_malformed_messages_land_in_deadletter_with_their_reason(run: Run) -> None:
    letters = [DeadLetter.model_validate(d) for d in run.deadletters]
    assert len(letters) == len(MALFORMED)
    assert all(d.stage == "validate" for d in letters)
    not_json = [d for d in letters if d.payload == "this is not json"]
    assert len(not_json) == 1 and "not valid JSON" in not_json[0].error
    by_id = {d.interaction_id: d for d in letters if d.interaction_id}
    no_answer = by_id["no-answer"]
    assert "answer: Field required" in no_answer.error
    assert json.loads(no_answer.payload)["question"] == "Where?"  # the original payload travels along
    too_long = by_id["too-long"]
    assert "answer" in too_long.error and "over the limit" in too_long.error
    assert all(d.source_topic and d.source_topic.endswith("interactions") for d in letters)
    assert "Traceback" not in run.log
