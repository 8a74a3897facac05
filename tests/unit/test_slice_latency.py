"""A sliced chart's judge latency is defined as the unsliced chart's: quantiles of the calls' latency
histogram (``schemas.latency``), so applying a slice never changes what the line means."""

from __future__ import annotations

from datetime import timedelta

from schemas.evaluation_row import EvalRow
from schemas.latency import add_histograms, histogram, quantile
from schemas.results import JudgeCall
from schemas.slice_filter import SliceFilter
from schemas.slices import SliceQuery
from streams.clickhouse.slices import SliceReader
from streams.clickhouse.store import ClickHouseStore
from streams.slices import slice_series
from streams.windows.aggregator import WindowStats
from tests.fixtures import messages
from tests.fixtures.messages import T0


def slice_of(*terms: str) -> SliceFilter:
    return SliceFilter.model_validate(SliceFilter.parse_terms(list(terms)))


def calls(latencies: list[float]) -> list[JudgeCall]:
    return [JudgeCall(stage="nli", judge="openai", model="gpt", latency_ms=ms) for ms in latencies]


async def test_the_sliced_latency_is_the_windows_histogram_quantile(store: ClickHouseStore) -> None:
    plan = {"v1": [12.0, 80.0, 95.5], "v2": [3.0, 250.0, 1900.0, 40.0, 7.25]}
    evaluations = []
    for version, latencies in plan.items():
        for k, ms in enumerate(latencies):
            i = messages.interaction(
                interaction_id=f"{version}-{k}", timestamp=T0 + timedelta(seconds=k),
                metadata={"prompt_version": version},
            )  # fmt: skip
            evaluations.append(messages.evaluation(i, calls=calls([ms, ms / 2])))
    store.insert_evaluations_sync(evaluations)
    hour = {"start": T0, "end": T0 + timedelta(hours=1)}
    query = SliceQuery(**hour, slice=slice_of("prompt_version:v2"))
    [series] = slice_series(await SliceReader(store).series_rows(query, 3600))
    v2 = plan["v2"] + [ms / 2 for ms in plan["v2"]]
    assert series.latency_p50_ms == [quantile(histogram(v2), 0.5)]
    assert series.latency_p95_ms == [quantile(histogram(v2), 0.95)]
    # the unsliced chart pools the windows' histograms: the same definition
    window = WindowStats().extend(EvalRow.from_evaluation(e) for e in evaluations if "v2" in e.interaction_id)
    stored = window.result(window_start=T0, window_end=T0 + timedelta(hours=1), app="bot", model="m")
    assert quantile(add_histograms([stored.judge_latency_histogram]), 0.5) == series.latency_p50_ms[0]
    other = query.model_copy(update={"slice": slice_of("prompt_version:v1")})
    [v1] = slice_series(await SliceReader(store).series_rows(other, 3600))
    assert v1.latency_p50_ms != series.latency_p50_ms  # the slice's own calls
