"""groundwatch erase on chDB: every row of a conversation (or an interaction, or a pseudonym) leaves every
table with an interaction_id column, other people's rows stay, window aggregates stay, and the erasure
is recorded. ``erase_scenario`` runs over HTTP too (tests/integration/test_erase_over_http.py)."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from groundwatch.commands import erase_cmd
from schemas.errors import ConfigError
from streams.clickhouse.erase import erase
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.erase import T0, TOKEN, erase_scenario, fill, rows_of


def test_erase_a_conversation_from_every_table(store: ClickHouseStore) -> None:
    erase_scenario(store)


def test_erase_by_pseudonym_finds_the_interactions_whose_texts_hold_it(store: ClickHouseStore) -> None:
    fill(store)
    done = erase(store, "pseudonym", TOKEN, T0)
    assert done.interaction_ids == ["e-1", "e-2"]  # e-1's answer and both contexts hold it
    assert set(rows_of(store, ["e-1", "e-2"]).values()) == {0}
    assert rows_of(store, ["k-1"])["evaluations"] == 1


class OneNodeCluster:
    """The store as the one node of a cluster "gw": every statement erase sends is parsed by chDB first
    (EXPLAIN AST), then run on this node with the cluster parts taken out (no cluster runs here)."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store, self.db = store, store.db
        self.sent: list[str] = []

    def _local(self, sql: str, params: dict[str, Any] | None) -> str:
        self.sent.append(sql)
        self.store.query_sync(f"EXPLAIN AST {sql}", params)
        sql = re.sub(r"cluster\('gw', '(\w+)', '(\w+)'\)", r"\1.\2", sql)
        return sql.replace(" ON CLUSTER gw", "")

    def query_sync(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        return self.store.query_sync(self._local(sql, params) if "cluster(" in sql else sql, params)

    def command_sync(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        return self.store.command_sync(self._local(sql, params), params)

    def insert_rows_sync(self, *args: Any) -> Any:
        return self.store.insert_rows_sync(*args)


def test_on_a_cluster_every_shard_is_searched_counted_and_erased(store: ClickHouseStore) -> None:
    """With clickhouse.cluster the conversation's interactions are found and counted through the
    ``cluster`` table function (every shard, not only the node connected to) and deleted ON CLUSTER."""
    fill(store)
    node = OneNodeCluster(store)
    done = erase(node, "conversation", "c-erase", T0, "gw")  # type: ignore[arg-type]
    assert done.interaction_ids == ["e-1", "e-2"] and done.rows["evaluations"] == 2
    assert done.rows["conversations"] == 1
    reads = [sql for sql in node.sent if sql.startswith("SELECT")]
    deletes = [sql for sql in node.sent if sql.startswith("DELETE")]
    assert reads and all(f"cluster('gw', '{store.db}', '" in sql for sql in reads)
    assert deletes and all(" ON CLUSTER gw " in sql for sql in deletes)
    assert set(rows_of(store, ["e-1", "e-2"]).values()) == {0}
    assert erase(node, "pseudonym", TOKEN, T0, "gw").interaction_ids == []  # type: ignore[arg-type]


def test_erase_one_interaction(store: ClickHouseStore) -> None:
    fill(store)
    done = erase(store, "interaction", "k-1", T0)
    assert done.interaction_ids == ["k-1"] and done.rows["dead_letters"] == 1
    assert set(rows_of(store, ["k-1"]).values()) == {0}
    assert rows_of(store, ["e-1"])["evaluations"] == 1


@pytest.mark.parametrize(
    "given",
    [{"pseudonym": "EMAIL_1"}, {"pseudonym": "<email_3f9a0c2d1b7e>"}, {"interaction": "  "}],
)
def test_a_malformed_target_is_one_line(given: dict[str, str]) -> None:
    args = argparse.Namespace(**{"interaction": None, "conversation": None, "pseudonym": None, **given})
    with pytest.raises(ConfigError):
        erase_cmd.target(args)


def test_a_pseudonym_is_accepted_with_or_without_brackets() -> None:
    for given in (TOKEN, TOKEN.strip("<>")):
        args = argparse.Namespace(interaction=None, conversation=None, pseudonym=given)
        assert erase_cmd.target(args) == ("pseudonym", TOKEN)
