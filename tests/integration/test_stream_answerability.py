"""Answerability through a real worker (Tansu, the default topology, embedded chDB, lexical judge): the
windows' reject/answerable recall and precision equal ``groundwatch eval``'s Trust-Eval figures on the same
lines."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from groundwatch.commands import eval_cmd
from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from schemas.metrics import METRICS_BY_NAME, pooled
from tests.fixtures.answerability import CONTEXT, PARITY_LINES
from tests.integration.helpers import deployment

SETTING = "GROUNDWATCH_PIPELINE__NO_EVIDENCE_UNANSWERABLE"
OFFLINE = {
    "reject_recall": "reject_rec",
    "reject_precision": "reject_prec",
    "answerable_recall": "answerable_rec",
    "answerable_precision": "answerable_prec",
}


def test_the_worker_windows_and_eval_agree(
    broker: TansuBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        json.dumps({"question": "Where is the jack?", "contexts": [CONTEXT], "app": "parity", **line})
        for line in PARITY_LINES
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    dep = deployment(broker.url, tmp_path / "stack", extra_env={SETTING: "true"})
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        assert asyncio.run(replay(dep.settings(), lines)).sent == len(lines)
        wait_for(lambda: dep.evaluations() >= len(lines), 120, "every evaluation in ClickHouse")
    finally:
        code = worker.stop()  # the stop writes the windows still open
    assert code == 0, worker.tail()
    windows = [w for w in dep.report().windows if w.app == "parity"]
    online = {name: pooled(METRICS_BY_NAME[name], windows) for name in OFFLINE}

    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    out = tmp_path / "report.json"
    monkeypatch.setenv(SETTING, "true")
    args = parser.parse_args([str(path), "--judge", "lexical", "--out", str(out), "--quiet"])
    assert eval_cmd.run(args) == 0
    offline = json.loads(out.read_text())["trust_eval"]

    assert online == pytest.approx({name: offline[key] for name, key in OFFLINE.items()})
    assert all(v is not None for v in online.values())
    assert sum(w.answerable_questions for w in windows) == offline["answerable_num"]
