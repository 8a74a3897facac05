"""Conversation metrics in the Breakdown and on Compare, computed from the conversations (a conversation is
in the slice of its last turn; an interaction without a conversation_id is a conversation of one turn), and
equal, over the whole range, to what the windows count."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from pipeline.clock import ManualClock
from schemas.compare import CompareQuery
from schemas.evaluation import Evaluation
from schemas.metrics import METRICS, Over, named
from schemas.settings import DimensionSettings
from schemas.slices import BreakdownQuery
from streams.clickhouse.slices import SliceReader, conversation_metric_sql
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.compare import read_compare
from streams.slices import read_breakdown
from tests.fixtures.conversations import T0, closers, deliver, ev
from tests.fixtures.store import store_settings

SPAN = {"start": T0, "end": T0 + timedelta(hours=1)}


@pytest.fixture()
def store() -> Iterator[ClickHouseStore]:
    s = ClickHouseStore.open_sync(store_settings(), dimensions=DimensionSettings(paths=["tier"]))
    yield s
    s.close()


def tiered(e: Evaluation, tier: str) -> Evaluation:
    assert e.interaction is not None
    metadata = {**e.interaction.metadata, "tier": tier}
    return e.model_copy(update={"interaction": e.interaction.model_copy(update={"metadata": metadata})})


async def traffic(store: ClickHouseStore) -> None:
    """App a: gold c1 (ends on a refusal) and c2 (resolved); silver c3 (resolved, a re-ask), the single
    interaction s1 (a refusal) and c4 (a gold turn, then a silver one that hallucinates). App b: gold c5,
    unresolved."""
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock)
    turns = [
        tiered(ev("c1-1", "c1", 1), "gold"),
        tiered(ev("c1-2", "c1", 2, answer="I can't help.", refusal=True, end=True), "gold"),
        tiered(ev("c2-1", "c2", 3), "gold"),
        tiered(ev("c2-2", "c2", 4, end=True), "gold"),
        tiered(ev("c3-1", "c3", 5, question="Where is my parcel?"), "silver"),
        tiered(ev("c3-2", "c3", 6, question="Where is my parcel now?", end=True), "silver"),
        tiered(ev("s1", None, 7, refusal=True), "silver"),
        tiered(ev("c4-1", "c4", 8), "gold"),
        tiered(ev("c4-2", "c4", 9, halluc=True, end=True), "silver"),
        tiered(ev("c5-1", "c5", 10, refusal=True, end=True, app="b"), "gold"),
    ]
    await deliver(store, convs, windows, turns)
    assert len(await convs.close_due()) == 5
    await windows.close_due(final=True)


async def test_the_breakdown_of_a_conversation_metric_counts_each_conversation_in_its_last_turns_slice(
    store: ClickHouseStore,
) -> None:
    await traffic(store)
    reader = SliceReader(store)
    q = BreakdownQuery(**SPAN, app="a", metric="conversation_unresolved_rate", dimension="tier")
    b = await read_breakdown(reader, q)
    got = {s.value: (s.metric, s.n, s.interactions) for s in b.slices}
    assert got == {"gold": (pytest.approx(1 / 2), 2, 2), "silver": (pytest.approx(2 / 3), 3, 3)}
    assert b.period.value == pytest.approx(3 / 5) and b.period.interactions == 5
    # the whole range's value is the windows' own
    [w] = [w for w in store.windows_sync() if w.app == "a"]
    assert w.conversation_unresolved_rate == pytest.approx(b.period.value)
    turns = await read_breakdown(reader, q.model_copy(update={"metric": "mean_turns_per_conversation"}))
    assert {s.value: s.metric for s in turns.slices} == {"gold": 2.0, "silver": pytest.approx(5 / 3)}
    reask = await read_breakdown(reader, q.model_copy(update={"metric": "conversation_reask_rate"}))
    assert {s.value: s.metric for s in reask.slices} == {"gold": 0.0, "silver": pytest.approx(1 / 3)}
    closed = await read_breakdown(reader, q.model_copy(update={"metric": "conversations_closed"}))
    assert {s.value: s.metric for s in closed.slices} == {"gold": 2.0, "silver": 3.0}
    # the slice filter holds: app b's one conversation, gold
    by_b = BreakdownQuery(**SPAN, metric="conversation_unresolved_rate", dimension="tier", slice=["app:b"])
    only_b = await read_breakdown(reader, by_b)
    assert {s.value: (s.metric, s.n) for s in only_b.slices} == {"gold": (1.0, 1)}
    # a period before the traffic has no conversation
    empty = await read_breakdown(
        reader, q.model_copy(update={"start": T0 - timedelta(hours=2), "end": T0 - timedelta(hours=1)})
    )
    assert empty.slices == [] and empty.period.value is None


async def test_compare_gives_conversation_metrics_with_their_difference(store: ClickHouseStore) -> None:
    await traffic(store)
    report = await read_compare(
        store, CompareQuery(**SPAN, a=["app:a", "tier:gold"], b=["app:a", "tier:silver"])
    )
    by_name = {m.name: m for m in report.metrics}
    u = by_name["conversation_unresolved_rate"]
    assert (u.a, u.a_n, u.b, u.b_n) == (pytest.approx(1 / 2), 2, pytest.approx(2 / 3), 3)
    assert u.difference == pytest.approx(2 / 3 - 1 / 2) and u.test == "fisher" and u.p_value is not None
    h = by_name["conversation_hallucinated_rate"]
    assert (h.a, h.b) == (0.0, pytest.approx(1 / 3))
    t = by_name["mean_turns_per_conversation"]
    assert (t.a, t.b, t.test) == (2.0, pytest.approx(5 / 3), "welch")
    assert (by_name["conversations_closed"].a, by_name["conversations_closed"].b) == (2.0, 3.0)
    # the interaction metrics beside them, from the interactions of each slice
    assert by_name["hallucination_rate"].a_n == 5 and by_name["hallucination_rate"].b_n == 4
    # an empty side has no value and no difference
    none = await read_compare(store, CompareQuery(**SPAN, a=["app:a"], b=["app:nobody"]))
    n = {m.name: m for m in none.metrics}["conversation_unresolved_rate"]
    assert (n.a, n.b_n, n.b, n.difference) == (pytest.approx(3 / 5), 0, None, None)


def test_every_conversation_metric_reads_a_figure_of_the_conversation_rows() -> None:
    from streams.clickhouse.slices import _ROLLUP_FIGURES

    for m in METRICS:
        if m.over is Over.CONVERSATION and m.source is not None:
            assert m.source in _ROLLUP_FIGURES, m.name
    _, den = conversation_metric_sql(named("conversation_unresolved_rate"), "app = 'x'")
    assert den == "countIf((app = 'x') AND judged_turns > 0)"
    assert conversation_metric_sql(named("conversation_reask_rate"))[1] == "countIf((1))"
