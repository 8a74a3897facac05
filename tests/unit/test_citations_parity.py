"""Online and offline citation figures agree: the same cases through the worker's staged processors (convert,
judge, join; the Converted and the judge result travel as JSON), stored in ClickHouse and pooled by the
window aggregator, and through ``groundwatch eval``, give the same per-interaction figures and the same
pooled metrics."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from groundwatch.commands import eval_cmd
from pipeline.clock import ManualClock
from pipeline.judges.lexical import LexicalJudge
from pipeline.nli_grouping import nli_judge
from pipeline.privacy.mask import PrivacyGuard
from pipeline.refusal import RefusalClassifier
from pipeline.sampling import Sampler
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.metrics import SCORED, pooled
from schemas.settings import PrivacySettings, Settings
from streams.acks import OrderedAcks
from streams.clickhouse.store import ClickHouseStore
from streams.context import new_context
from streams.processors.convert import ConvertProcessor
from streams.processors.join import JoinProcessor
from streams.processors.judge import JudgeProcessor
from streams.testing import Event, Topic
from streams.windows.aggregator import WindowStats
from tests.fixtures.messages import EVALUATED_AT, T0
from tests.settings_factory import make_settings

CONTEXTS = [
    {"text": "The Eiffel Tower was completed in 1889 in Paris.", "document": "eiffel.md"},
    {"text": "The Colosseum in Rome was completed in 80 AD.", "document": "colosseum.md"},
    {"text": "Big Ben's clock tower in London was completed in 1859.", "document": "bigben.md"},
]
ANSWERS = {
    "right": "The Eiffel Tower was completed in 1889 [1]. The Colosseum was completed in 80 AD [2].",
    "swapped": "The Eiffel Tower was completed in 1889 [2]. The Colosseum was completed in 80 AD [1].",
    "off_by_one": "The Colosseum was completed in 80 AD [3]. Big Ben's tower was completed in 1859 [4].",
    "uncited": "The Eiffel Tower was completed in 1889. Big Ben's tower was completed in 1859 [^3].",
    "invented": "The Eiffel Tower was completed in 1925 [1]. It was painted gold in 1930 [1].",
    "footnote": "The Eiffel Tower was completed in 1889.[^e]\n\n[^e]: eiffel.md",
    "none": "The Eiffel Tower was completed in 1889. The Colosseum was completed in 80 AD.",
    "refusal": "I don't know when they were built [1].",
}
FIGURES = (
    "citation_recall",
    "citation_precision",
    "uncited_statements",
    "miscited",
    "dangling_citations",
    "dangling_citation",
)


def cases() -> list[Interaction]:
    return [
        Interaction.model_validate(
            {
                "id": name,
                "timestamp": T0,
                "app": "bot",
                "model": "m",
                "question": "When was it built?",
                "contexts": CONTEXTS,
                "answer": answer,
            }
        )
        for name, answer in ANSWERS.items()
    ]


def settings() -> Settings:
    return make_settings(judge={"kind": "lexical"}, kafka={"join_timeout_s": 10.0})


async def online(interactions: list[Interaction]) -> list[Evaluation]:
    """The worker's staged processors, each message handed on as the bytes it sent."""
    ctx = new_context(settings(), app=None)  # type: ignore[arg-type]
    for name in ctx.names.all():
        ctx.topics[name] = Topic()
    judge = LexicalJudge()

    async def ready() -> Any:
        return resources

    resources = SimpleNamespace(
        wait_ready=ready, judge=judge, nli_judge=nli_judge(judge, ctx.settings),
        refusals=RefusalClassifier(judge, ctx.settings), relevance=None, custom=None, arguments=None,
        sampler=Sampler.from_files(None, 1.0), privacy=PrivacyGuard(PrivacySettings()), store_open=None,
    )  # fmt: skip
    acked: list[tuple[str, int]] = []

    async def feed(processor: Any, topic: str, values: list[bytes]) -> None:
        for offset, value in enumerate(values):
            event = Event.at(topic, offset, value, acked)
            if isinstance(processor, JoinProcessor):  # holds parts until all are in
                await processor.handle(event, processor.acks.track(event))
            else:
                await processor.handle(event)
        if isinstance(processor, JoinProcessor):
            await processor.pool.drain()

    def sent(topic: str) -> list[bytes]:
        out = ctx.topics[topic]
        assert isinstance(out, Topic)
        return list(out.sent)

    names = ctx.names
    convert = ConvertProcessor(ctx, resources)  # type: ignore[arg-type]
    judged = JudgeProcessor(ctx, resources)  # type: ignore[arg-type]
    join = JoinProcessor(ctx, resources, clock=ManualClock(EVALUATED_AT))  # type: ignore[arg-type]
    join.acks = OrderedAcks()
    await feed(convert, names.interactions, [i.model_dump_json().encode() for i in interactions])
    await feed(judged, names.converted, sent(names.converted))
    await feed(join, names.converted, sent(names.converted))
    await feed(join, names.judged, sent(names.judged))
    return [Evaluation.model_validate_json(v) for v in sent(names.evaluations)]


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
