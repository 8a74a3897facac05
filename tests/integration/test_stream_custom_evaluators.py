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
        # the windows are marked through the touches topic: a stop right after the last write can come
        # before they are (the next start marks them: WindowCloser.reconcile); the timer closes one first
        stack.wait_for_windows(1, timeout_s=120)
        report = stack.finish()
    assert report.counts["evaluations"] == 20
    windows = report.windows
    for name in ("names_competitor", "as_an_ai", "dodges_question", "same_language", "answer_in_context"):
        assert sum(w.custom_scored.get(name, 0) for w in windows) == 20, name
    rubric_missing = sum(w.custom_missing.get("no_medical_advice", 0) for w in windows)
    assert 0 < rubric_missing < 20  # sampled at 0.5; the lexical judge cannot run it
    assert sum(w.incomplete for w in windows) == 0


ADVERSARIES = """
import sys


def leave(interaction):
    sys.exit(1)


def spin(interaction):
    while True:
        pass


def short(interaction):
    return len(interaction.answer) < 200
"""


def test_evaluators_that_exit_or_spin_cost_only_their_scores_and_the_worker_stops_cleanly(
    tmp_path: Path,
) -> None:
    """On main before the evaluators' subprocesses, ``sys.exit`` in an evaluator stopped the worker (and
    again at each restart) and a spinning one held its event loop and made every stop time out."""
    (tmp_path / "adversaries.py").write_text(ADVERSARIES, encoding="utf-8")
    evaluators = tmp_path / "evaluators.yaml"
    evaluators.write_text(
        "evaluators:\n"
        "  - {name: leaver, version: '1', kind: python, function: 'adversaries:leave'}\n"
        "  - {name: spinner, version: '1', kind: python, function: 'adversaries:spin', timeout_s: 1}\n"
        "  - {name: short, version: '1', kind: python, function: 'adversaries:short', output: pass_fail}\n",
        encoding="utf-8",
    )
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()][:20]
    env = {"GROUNDWATCH_JUDGE__KIND": "lexical", "GROUNDWATCH_EVALUATORS__FILE": str(evaluators)}
    with LocalStack(tmp_path / "stack", env, partitions=2, window_seconds=2) as stack:
        stack.replay(lines)
        stack.wait_for_evaluations(20, timeout_s=180)
        assert stack.stop_worker() == 0  # SIGTERM with spinning calls in flight: a clean stop
        report = stack.report()
        log = stack.worker_log.read_text(encoding="utf-8", errors="replace")
    windows = report.windows
    assert report.counts["evaluations"] == 20
    assert sum(w.custom_missing.get("leaver", 0) for w in windows) == 20
    assert sum(w.custom_missing.get("spinner", 0) for w in windows) == 20
    assert sum(w.custom_scored.get("short", 0) for w in windows) == 20
    assert "custom evaluator leaver gave no score: raised SystemExit: 1" in log
    assert "ShutdownTimeout" not in log and "Traceback" not in log
