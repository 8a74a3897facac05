"""Your own evaluators in a running worker (LocalStack: Tansu broker, worker process, embedded chDB): the
shipped examples score every interaction on either topology, their scores are stored and windowed, and
the rubric (no LLM judge here) is missing with its reason, never failing an interaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwatch.local.stack import LocalStack

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "groundwatch" / "data" / "sample_interactions.jsonl"
EXAMPLES = ROOT / "deploy" / "evaluators" / "evaluators.yaml"


@pytest.mark.parametrize("topology", ["staged", "fused"])
def test_the_shipped_evaluators_run_in_the_worker(tmp_path: Path, topology: str) -> None:
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()][:20]
    env = {
        "GROUNDWATCH_JUDGE__KIND": "lexical",
        "GROUNDWATCH_KAFKA__TOPOLOGY": topology,
        "GROUNDWATCH_EVALUATORS__FILE": str(EXAMPLES),
    }
    with LocalStack(tmp_path, env, partitions=2, window_seconds=2) as stack:
        stack.replay(lines)
        stack.wait_for_evaluations(20, timeout_s=120)
        report = stack.finish()
    assert report.counts["evaluations"] == 20
    windows = report.windows
    for name in ("names_competitor", "as_an_ai", "dodges_question", "same_language", "answer_in_context"):
        assert sum(w.custom_scored.get(name, 0) for w in windows) == 20, name
    rubric_missing = sum(w.custom_missing.get("no_medical_advice", 0) for w in windows)
    assert 0 < rubric_missing < 20  # sampled at 0.5; the lexical judge cannot run it
    assert sum(w.incomplete for w in windows) == 0
