"""LocalStack (what the demo uses): broker + worker + replay + report in one object, on sample traffic.

This test starts its own Tansu broker (as the demo does), not the session one."""

from __future__ import annotations

import json
from pathlib import Path

from groundwatch.local.stack import LocalStack
from groundwatch.trend_report import render

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"


def test_local_stack_runs_sample_traffic_end_to_end(tmp_path: Path) -> None:
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()][:25]
    seen: list[int] = []
    with LocalStack(
        tmp_path, {"GROUNDWATCH_JUDGE__KIND": "lexical"}, partitions=2, window_seconds=2
    ) as stack:
        assert stack.replay(lines).sent == 25
        stack.wait_for_evaluations(25, timeout_s=120, on_progress=seen.append)
        report = stack.finish()
    assert seen[-1] == 25 and seen == sorted(seen)
    assert report.counts["evaluations"] == 25
    assert sum(w.count for w in report.windows) == 25
    apps = {(json.loads(line).get("app"), json.loads(line).get("model")) for line in lines}
    assert {(w.app, w.model) for w in report.windows} == apps
    text = render(report)
    for app, model in apps:
        per_group = [w for w in report.windows if (w.app, w.model) == (app, model)]
        n = sum(w.count for w in per_group)
        assert f"== {app} / {model}: {n} interactions ({n} judged) in {len(per_group)} windows" in text
    assert stack.broker.process is None and not stack.worker.alive()  # type: ignore[union-attr]


def test_fused_topology_evaluates_each_interaction_once(tmp_path: Path) -> None:
    sample = [line for line in SAMPLE.read_text().splitlines() if line.strip()]
    lines = [*sample[25:45], "{broken"]
    env = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_KAFKA__TOPOLOGY": "fused"}
    with LocalStack(tmp_path, env, partitions=2, window_seconds=2) as stack:
        stack.replay(lines)
        stack.wait_for_evaluations(20, timeout_s=120)
        report = stack.finish()
    assert report.counts["evaluations"] == 20 and sum(w.count for w in report.windows) == 20
    log = stack.worker_log.read_text()
    assert "evaluate_agent" in log and "join_agent" not in log  # one processor, no join
    assert "dead letter: stage=validate" in log and "not valid JSON" in log


def test_windows_closed_by_the_stop_still_fire_their_alerts(tmp_path: Path) -> None:
    """A window still open when the worker stops is written on the way out, and its alerts are published
    while faust's producer is still up (the demo's case: all traffic in one window, then stop)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - name: any-traffic\n    metric: answer_refusal_rate\n    op: '>='\n    threshold: 0.0\n"
        "    windows: 1\n    min_interactions: 1\n    cooldown_seconds: 0\n",
        encoding="utf-8",
    )
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()][:10]
    env = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_ALERTS__RULES_FILE": str(rules)}
    with LocalStack(tmp_path / "stack", env, partitions=2, window_seconds=3600) as stack:
        stack.replay(lines)
        stack.wait_for_evaluations(10, timeout_s=120)
        report = stack.finish()
    pairs = {(json.loads(line)["app"], json.loads(line)["model"]) for line in lines}
    assert {(a.app, a.model) for a in report.alerts} == pairs
    assert "Producer service not yet started" not in stack.worker_log.read_text()
