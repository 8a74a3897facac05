"""Online and offline citation figures agree: the same cases through the worker's staged processors (convert,
judge, join; the Converted and the judge result travel as JSON), stored in ClickHouse and pooled by the
window aggregator, and through ``groundwatch eval``, give the same per-interaction figures and the same
pooled metrics."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from groundwatch.commands import eval_cmd
from schemas.interaction import Interaction
from schemas.metrics import SCORED, pooled
from streams.clickhouse.store import ClickHouseStore
from streams.windows.aggregator import WindowStats
from tests.fixtures.citations import ANSWERS, cases, online
from tests.fixtures.messages import T0

FIGURES = (
    "citation_recall",
    "citation_precision",
    "uncited_statements",
    "miscited",
    "dangling_citations",
    "dangling_citation",
)


async def offline(
    interactions: list[Interaction], tmp_path: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(i.model_dump_json() + "\n" for i in interactions), encoding="utf-8")
    out = tmp_path / "report.json"
    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    args = parser.parse_args([str(data), "--judge", "lexical", "--out", str(out), "--quiet"])
    await eval_cmd.run_eval(args)
    lines = (tmp_path / "report.evaluations.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(out.read_text(encoding="utf-8")), [json.loads(line) for line in lines]


@pytest.fixture
def parity_store(store: ClickHouseStore) -> ClickHouseStore:
    return store


async def test_the_worker_and_groundwatch_eval_give_the_same_citation_figures(
    parity_store: ClickHouseStore, tmp_path: Path
) -> None:
    interactions = cases()
    streamed = {e.interaction_id: e for e in await online(interactions)}
    report, evaluated = await offline(interactions, tmp_path)
    assert sorted(streamed) == sorted(ANSWERS)
    for line in evaluated:
        mine = streamed[line["interaction_id"]]
        assert {f: line[f] for f in FIGURES} == {f: getattr(mine, f) for f in FIGURES}, mine.interaction_id
    # the figures say what each case is
    assert streamed["right"].miscited is False and streamed["swapped"].miscited is True
    assert streamed["off_by_one"].miscited is True and streamed["off_by_one"].dangling_citations == 1
    assert streamed["uncited"].uncited_statements == 0.5 and streamed["invented"].miscited is True
    assert streamed["footnote"].citation_recall == 1.0
    assert streamed["none"].miscited is None and streamed["refusal"].miscited is None
    assert streamed["swapped"].hallucination is False  # grounded, but not where it says
    # stored, read back and windowed as the worker does: the same pooled metrics as the eval report
    await parity_store.insert_evaluations(list(streamed.values()))
    rows = await parity_store.rows_between("bot", "m", T0, T0.replace(hour=T0.hour + 1))
    assert len(rows) == len(ANSWERS)
    window = WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="bot", model="m")
    for metric in SCORED:
        assert report["metrics"][metric.name] == pytest.approx(pooled(metric, [window])), metric.name
    assert report["metrics"]["miscited_rate"] == pytest.approx(3 / 6)  # swapped, off by one, invented
