"""Dimensions of an evaluation and their cardinality guard: extraction, the per-day limit, and the
guard's memory read back from ClickHouse (so it holds across a restart)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.dimensions import OTHER, CardinalityGuard, answer_length_bucket, extract, turn_bucket
from schemas.evaluation import Evaluation
from schemas.interaction import ChatMessage, Interaction
from schemas.settings import DimensionSettings
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures import messages
from tests.fixtures.store import store_settings
from tests.integration.chdb import fresh_chdb_url

DAY = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def interaction(**kw: Any) -> Interaction:
    return messages.interaction(**{"interaction_id": "i", "question": "q?", "answer": "a", "timestamp": DAY,
                                   "app": "default", "model": "unknown", **kw})  # fmt: skip


def test_paths_nested_dotted_and_typed_values() -> None:
    settings = DimensionSettings(
        paths=["prompt_version", "customer.tier", "flag", "n", "obj", "blank", "gone"]
    )
    i = interaction(
        metadata={
            "prompt_version": "v2",
            "customer": {"tier": "gold"},
            "flag": True,
            "n": 3,
            "obj": {"b": 1, "a": [1, 2]},
            "blank": "",
        }
    )
    dims = extract(i, settings)
    assert dims["prompt_version"] == "v2" and dims["customer.tier"] == "gold"
    assert dims["flag"] == "true" and dims["n"] == "3" and dims["obj"] == '{"a":[1,2],"b":1}'
    assert dims["blank"] == "(empty)" and "gone" not in dims
    # a key holding the dot itself wins over the nested path
    flat = interaction(metadata={"customer.tier": "flat", "customer": {"tier": "nested"}})
    assert extract(flat, settings)["customer.tier"] == "flat"


def test_unknown_top_level_fields_are_metadata_and_values_are_cut() -> None:
    settings = DimensionSettings(paths=["retriever"], max_value_chars=5)
    i = Interaction.model_validate({"id": "x", "question": "q", "answer": "a", "retriever": "dense-v1234"})
    assert extract(i, settings)["retriever"] == "dense"


def test_builtins() -> None:
    assert [answer_length_bucket(n) for n in (0, 99, 100, 499, 500, 1999, 2000)] == [
        "<100", "<100", "100-499", "100-499", "500-1999", "500-1999", "2000+",
    ]  # fmt: skip
    assert [turn_bucket(n) for n in (1, 2, 3, 5, 6, 10, 11)] == [
        "1",
        "2",
        "3-5",
        "3-5",
        "6-10",
        "6-10",
        "11+",
    ]
    history = [ChatMessage(role="user", content="x"), ChatMessage(role="assistant", content="y")] * 2
    i = interaction(answer="a" * 150, ground_truth="g", history=[h.model_dump() for h in history])
    dims = extract(i, DimensionSettings(paths=[]))
    assert dims == {"answer_length": "100-499", "has_ground_truth": "yes", "turn": "3-5"}
    assert extract(interaction(), DimensionSettings(paths=[]))["has_ground_truth"] == "no"
    assert extract(None, DimensionSettings()) == {}


@pytest.mark.parametrize(
    "paths", [["turn"], ["app"], ["model"], ["a", "a"], ["bad path"], ["a..b"], [".a"], ["x" * 65]], ids=str
)
def test_bad_paths_are_refused(paths: list[str]) -> None:
    with pytest.raises(ValidationError):
        DimensionSettings(paths=paths)


def test_the_guard_keeps_the_first_values_of_a_day_and_others_become_other() -> None:
    seeds: list[date] = []

    def seed(day: date) -> Mapping[str, Iterable[str]]:
        seeds.append(day)
        return {}

    guard = CardinalityGuard(2, seed)
    d1, d2 = date(2026, 1, 5), date(2026, 1, 6)
    got = [guard.admit(d1, {"k": v})["k"] for v in ("a", "b", "c", "a", "b", "d")]
    assert got == ["a", "b", OTHER, "a", "b", OTHER]
    assert guard.admit(d2, {"k": "c"}) == {"k": "c"}  # a new day starts afresh
    assert guard.admit(d1, {"j": "z"}) == {"j": "z"}  # each dimension has its own limit
    assert seeds == [d1, d2] and guard.others == 2


def test_stored_values_count_and_an_evicted_day_is_read_again() -> None:
    stored = {date(2026, 1, 5): {"k": ["a", "b", OTHER]}}
    reads: list[date] = []

    def seed(day: date) -> Mapping[str, Iterable[str]]:
        reads.append(day)
        return stored.get(day, {})

    guard = CardinalityGuard(2, seed, days=1)
    assert guard.admit(date(2026, 1, 5), {"k": "c"}) == {"k": OTHER}
    assert guard.admit(date(2026, 1, 5), {"k": "b"}) == {"k": "b"}
    guard.admit(date(2026, 1, 6), {"k": "x"})  # pushes the 5th out of memory
    assert guard.admit(date(2026, 1, 5), {"k": "c"}) == {"k": OTHER}
    assert reads == [date(2026, 1, 5), date(2026, 1, 6), date(2026, 1, 5)]


def evaluation(iid: str, version: str, at: datetime = DAY) -> Evaluation:
    i = interaction(interaction_id=iid, timestamp=at, metadata={"prompt_version": version})
    return messages.evaluation(i, app="a", model="m", answer_refusal=None)


def stored(store: ClickHouseStore) -> dict[str, str]:
    rows = store.query_sync(
        f"SELECT interaction_id, dimensions['prompt_version'] AS v FROM {store.db}.evaluations FINAL"
    )
    return {r["interaction_id"]: r["v"] for r in rows}


def test_the_guard_holds_across_a_restart_on_the_stored_rows() -> None:
    url = fresh_chdb_url()
    settings = DimensionSettings(paths=["prompt_version"], max_values_per_day=2)
    store = ClickHouseStore.open_sync(store_settings(url), dimensions=settings)
    store.insert_evaluations_sync([evaluation("1", "v1"), evaluation("2", "v2"), evaluation("3", "v3")])
    store.close()
    # a new store (a restarted worker) knows nothing but what is stored
    again = ClickHouseStore.open_sync(store_settings(url), dimensions=settings)
    next_day = DAY + timedelta(days=1)
    again.insert_evaluations_sync(
        [
            evaluation("4", "v4"),  # the day is full: (other)
            evaluation("5", "v2"),  # admitted before the restart: kept
            evaluation("3", "v3"),  # a redelivery of an (other): still (other)
            evaluation("6", "v4", at=next_day),  # another day: admitted
        ]
    )
    assert stored(again) == {"1": "v1", "2": "v2", "3": OTHER, "4": OTHER, "5": "v2", "6": "v4"}
    row = again.query_sync(f"SELECT dimensions FROM {again.db}.evaluations FINAL WHERE interaction_id = '1'")
    assert row[0]["dimensions"] == {
        "prompt_version": "v1", "answer_length": "<100", "has_ground_truth": "no", "turn": "1",
    }  # fmt: skip
    again.close()
