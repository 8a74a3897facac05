"""``groundwatch eval`` on several processes (groundwatch.judging): the same Evaluations as in one, in
input order; a judging process killed mid-run costs no line; a small file is judged in one process."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from pathlib import Path

from groundwatch.commands import eval_cmd
from groundwatch.judging import CHUNK_LINES, Here, JudgingPool, Workers, processes_for
from pipeline.dataset import DatasetLine, read_dataset
from pipeline.evaluator import Evaluator
from pipeline.judges.factory import open_judge
from pipeline.privacy.mask import PrivacyGuard
from schemas.settings import Settings

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"
#: what differs between two runs of the same file: when (a line without a timestamp gets the time it is
#: read), and how the refusal batches fell
RUN_FIELDS = ("timestamp", "evaluated_at", "calls", "stage_seconds", "judge_latency_ms", "judge_calls")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


def _verdicts(path: Path) -> list[dict[str, object]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        evaluation = json.loads(line)
        for field in RUN_FIELDS:
            evaluation.pop(field)
        evaluation["interaction"].pop("timestamp")
        out.append(evaluation)
    return out


def test_two_processes_give_the_evaluations_of_one_in_input_order(tmp_path: Path) -> None:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 2 * CHUNK_LINES  # enough for a judging process beside this one
    runs = {}
    for processes in ("1", "2"):
        out = tmp_path / processes / "report.json"
        argv = (str(SAMPLE), "--judge", "lexical", "--out", str(out), "--quiet", "--bootstrap", "0")
        assert eval_cmd.run(_args(*argv, "--processes", processes)) == 0
        runs[processes] = _verdicts(out.with_name("report.evaluations.jsonl"))
        report = json.loads(out.read_text(encoding="utf-8"))
        assert (report["evaluated"], report["failed"]) == (len(lines), 0)
    assert [e["interaction_id"] for e in runs["2"]] == [json.loads(x)["id"] for x in lines]
    assert runs["2"] == runs["1"]


def test_a_small_file_is_judged_in_one_process() -> None:
    assert processes_for(CHUNK_LINES, 8) == 1
    assert processes_for(CHUNK_LINES + 1, 8) == 2
    assert processes_for(10 * CHUNK_LINES, 4) == 4
    assert processes_for(0, 4) == 1


async def _judge_after_a_kill(workers: Workers, lines: list[DatasetLine], settings: Settings) -> JudgingPool:
    async with open_judge(settings) as judge:
        here = Here(Evaluator(judge, settings), PrivacyGuard(settings.privacy), 8)
        pool = JudgingPool(workers, here)
        rows, errors = await pool.judge(lines)
    assert errors == []
    assert sorted(line.line for line, _ in rows) == [line.line for line in lines]  # each once
    assert all(e.interaction_id == line.interaction.interaction_id for line, e in rows)
    return pool


def test_a_judging_process_killed_costs_no_line_and_its_pool_starts_again(tmp_path: Path) -> None:
    settings = Settings.from_values({"judge": {"kind": "lexical"}})
    dataset = read_dataset(SAMPLE, settings.limits)
    with Workers(settings, 1, 8) as workers:
        pid = workers.first_ready.result(timeout=120)
        os.kill(pid, signal.SIGKILL)  # kill -9 of the judging process, before it is given a chunk
        pool = asyncio.run(_judge_after_a_kill(workers, dataset.lines, settings))
    assert pool.restarts >= 1
