"""groundwatch erase on chDB: every row of a conversation (or an interaction, or a pseudonym) leaves every
table with an interaction_id column, other people's rows stay, window aggregates stay, and the erasure
is recorded. ``erase_scenario`` runs over HTTP too (tests/integration/test_erase_over_http.py)."""

from __future__ import annotations

import argparse
import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from groundwatch.commands import erase_cmd
from schemas.conversation import ConversationRollup
from schemas.deadletter import DeadLetter
from schemas.errors import ConfigError
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.results import HypothesisResult, PairResult, StatementVerdict
from schemas.window import WindowAggregate
from streams.clickhouse.conversations import ConversationRows
from streams.clickhouse.dead_letter_rows import dead_letter_row
from streams.clickhouse.erase import erase, interaction_tables
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.messages import EVALUATED_AT

RECEIVED = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the records' timestamp

FAILED_AT = datetime(2026, 11, 23, 12, tzinfo=UTC)  # a dead letter's failed_at

T0 = datetime(2026, 11, 1, 10, tzinfo=UTC)
TOKEN = "<EMAIL_3f9a0c2d1b7e>"
LABEL_COLUMNS = [
    "interaction_id", "kind", "reviewer", "value", "source", "labeled_at", "statements", "version"
]  # fmt: skip


def evaluation(iid: str, conversation: str, answer: str) -> Evaluation:
    interaction = Interaction(
        interaction_id=iid, conversation_id=conversation, question="Where do I write?", answer=answer,
        contexts=[{"text": f"Write to {TOKEN} for help."}] if conversation == "c-erase" else [],
    )  # fmt: skip
    pair = PairResult(
        pair="context_answer",
        score=1.0,
        hypotheses=[
            HypothesisResult(
                hypothesis=answer,
                score=1.0,
                statements=[StatementVerdict(statement=answer, verdict="entailed", score=1.0)],
            )
        ],
    )
    return Evaluation(evaluated_at=EVALUATED_AT,
        interaction_id=iid, timestamp=T0, app="a", model="m", conversation_id=conversation, judge="lexical",
        context_entailment=1.0, pairs=[pair], interaction=interaction,
    )  # fmt: skip


def fill(store: ClickHouseStore) -> None:
    """Two interactions of conversation c-erase, one of c-keep; dead letters, labels and a window."""
    store.insert_evaluations_sync(
        [
            evaluation("e-1", "c-erase", f"Write to {TOKEN}."),
            evaluation("e-2", "c-erase", "Any time."),
            evaluation("k-1", "c-keep", "Somewhere else."),
        ]
    )
    letters = [
        DeadLetter(
            failed_at=FAILED_AT,
            stage="nli",
            error_type="JudgeError",
            error="x",
            interaction_id=iid,
            payload="{}",
        )
        for iid in ("e-2", "k-1")
    ]
    rows = [dead_letter_row(d.model_dump_json().encode(), RECEIVED) for d in letters]
    asyncio.run(store.insert_dead_letter_rows(rows))
    store.insert_rows_sync(
        "labels",
        [[iid, "grounded", "ann", 1, "reviewer", T0, "[]", 1] for iid in ("e-1", "k-1")]
        # a reviewer's outcome label on each conversation (on its conversation_id)
        + [[cid, "resolved", "ann", 0, "reviewer", T0, "[]", 1] for cid in ("c-erase", "c-keep")],
        LABEL_COLUMNS,
    )
    window = WindowAggregate(
        window_start=T0, window_end=T0 + timedelta(hours=1), app="a", model="m", count=3,
        mean_context_entailment=1.0, mean_ground_truth_entails_answer=None,
        mean_answer_entails_ground_truth=None, answered=3, hallucinations=0, hallucination_rate=0.0,
        answer_refusal_rate=None, ground_truth_refusal_rate=None, input_tokens=0, output_tokens=0,
        cost_usd=0.0, judge_latency_p50_ms=None, judge_latency_p95_ms=None, incomplete=0,
    )  # fmt: skip
    asyncio.run(store.insert_window(window, T0))
    rollups = [
        ConversationRollup(
            app="a", model="m", conversation_id=cid, first_turn_at=T0, last_turn_at=T0, turns=turns,
            worst_turn_id=worst,
        )
        for cid, turns, worst in (("c-erase", 2, "e-1"), ("c-keep", 1, ""))
    ]  # fmt: skip
    ConversationRows(store).insert_sync([(c, 1, None, "") for c in rollups], T0)


def rows_of(store: ClickHouseStore, ids: list[str]) -> dict[str, int]:
    out = {}
    for table in interaction_tables(store):
        where = "has({ids:Array(String)}, ifNull(interaction_id, ''))"
        sql = f"SELECT count() AS n FROM {store.db}.{table} WHERE {where}"
        out[table] = int(store.query_sync(sql, {"ids": ids})[0]["n"])
    return out


def erase_scenario(store: ClickHouseStore) -> None:
    fill(store)
    tables = interaction_tables(store)
    assert {"evaluations", "evaluation_statements", "dead_letters", "labels"} <= set(tables)
    assert "evaluation_statements_current" not in tables  # a view: its rows go with its tables
    before = rows_of(store, ["e-1", "e-2", "k-1"])
    assert all(before[t] > 0 for t in ("evaluations", "labels", "dead_letters"))

    done = erase(store, "conversation", "c-erase", T0)
    assert done.interaction_ids == ["e-1", "e-2"]
    # the labels: e-1's and the one on the conversation
    assert done.rows["evaluations"] == 2 and done.rows["dead_letters"] == 1 and done.rows["labels"] == 2
    assert done.rows["evaluation_statements"] == 2 and done.rows["conversations"] == 1
    assert set(rows_of(store, ["e-1", "e-2"]).values()) == {0}  # gone from every table
    left = [c.conversation_id for c in ConversationRows(store).all_sync()]
    assert left == ["c-keep"]  # the conversation's rollup too, and only it
    kept = rows_of(store, ["k-1"])
    assert kept["evaluations"] == 1 and kept["labels"] == 1 and kept["dead_letters"] == 1
    assert rows_of(store, ["c-erase", "c-keep"])["labels"] == 1  # the other conversation's label stays
    assert store.query_sync(f"SELECT count() AS n FROM {store.db}.window_aggregates")[0]["n"] == 1
    recorded = store.query_sync(
        f"SELECT kind, target, interaction_ids, total_rows FROM {store.db}.erasures FINAL"
    )
    assert recorded == [
        {"kind": "conversation", "target": "c-erase", "interaction_ids": ["e-1", "e-2"], "total_rows": 8}
    ]
    again = erase(store, "conversation", "c-erase", T0 + timedelta(seconds=1))
    assert again.interaction_ids == [] and again.total_rows == 0  # nothing left to find


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
