"""The DDL for one server and for a cluster (``clickhouse.cluster``), parsed by chDB's own parser.

No ClickHouse cluster runs here: every statement the migrations send is recorded, then parsed and
normalised by ``formatQuery`` (chDB's SQL parser, the server's), and the normalised text is checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.errors import ConfigError
from schemas.settings import ClickHouseSettings
from streams.clickhouse.client import connect, parse_url
from streams.clickhouse.cluster import DISTRIBUTED_TABLES, ClusterRenderError, render
from streams.clickhouse.migrations import apply_migrations, ddl_dir, load_migrations
from tests.integration.chdb import fresh_chdb_url


@dataclass
class _Result:
    result_rows: list[Any] = field(default_factory=list)


@dataclass
class RecordingClient:
    """Stands in for a ClickHouse server nobody can run here: keeps each command, answers no rows."""

    commands: list[str] = field(default_factory=list)
    shards: int = 1  # what system.clusters says of the cluster

    def command(self, sql: str) -> None:
        self.commands.append(sql)

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> _Result:
        return _Result([[self.shards]] if "system.clusters" in sql else [])

    def insert(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture(scope="module")
def parser() -> Any:
    """A client of the test process's embedded chDB (chDB's parser is the server's)."""
    return connect(parse_url(fresh_chdb_url(), "groundwatch"))


def parsed(parser: Any, sql: str) -> str:
    """chDB's normalised text of ``sql`` (a syntax error raises)."""
    return str(parser.query("SELECT formatQuery({sql:String})", parameters={"sql": sql}).result_rows[0][0])


def sent(cluster: str | None, distributed: bool = False) -> list[str]:
    client = RecordingClient()
    apply_migrations(client, "gw", 30, ddl_dir(), cluster=cluster, distributed=distributed)
    return client.commands


def test_every_statement_for_one_server_is_the_file_as_written_and_parses(parser: Any) -> None:
    commands = sent(None)
    written = [s for m in load_migrations(ddl_dir(), "gw") for s in m.statements]
    assert commands[2 : 2 + len(written)] == written
    for sql in commands:
        text = parsed(parser, sql)
        assert "ON CLUSTER" not in text and "Replicated" not in text


def test_every_statement_for_a_cluster_runs_on_it_with_replicated_engines(parser: Any) -> None:
    commands = sent("gw_cluster", distributed=True)
    assert len(commands) == len(sent(None)) + len(DISTRIBUTED_TABLES)
    engines = 0
    for sql in commands:
        text = parsed(parser, sql)
        head = text.split("\n", 1)[0]
        if text.startswith("INSERT"):
            assert "ON CLUSTER" not in head  # the copy runs on this node; replication passes it on
            continue
        assert head.endswith("ON CLUSTER gw_cluster") or " ON CLUSTER gw_cluster " in head, head
        for engine in re.findall(r"ENGINE = (\w+)\(([^)]*)\)|ENGINE = (\w+)", text):
            name = engine[0] or engine[2]
            engines += 1
            if name == "Distributed":
                continue
            assert name.startswith("Replicated"), text
            assert engine[1].startswith("'/clickhouse/tables/{uuid}/{shard}', '{replica}'"), text
    # every table created (schema_migrations, the 9 of the migrations, 011's 3 copies, the Distributed
    # ones) had its engine checked
    creates = [c for c in commands if re.match(r"CREATE (OR REPLACE )?TABLE", c)]
    assert engines == len(creates) == 1 + 9 + 3 + len(DISTRIBUTED_TABLES)
    create = next(c for c in commands if c.startswith("CREATE TABLE gw.evaluations_v011"))
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', version)" in create
    assert "ON CLUSTER gw_cluster AS gw.evaluations" in create
    distributed = [c for c in commands if "Distributed(" in c]
    assert distributed[0] == (
        "CREATE OR REPLACE TABLE gw.evaluations_all ON CLUSTER gw_cluster AS gw.evaluations "
        "ENGINE = Distributed(gw_cluster, gw, evaluations)"
    )


def test_a_statement_of_an_unknown_form_is_refused_for_a_cluster_not_run_on_one_node() -> None:
    assert render("RENAME TABLE gw.a TO gw.b", None) == "RENAME TABLE gw.a TO gw.b"
    with pytest.raises(ClusterRenderError, match="RENAME TABLE"):
        render("RENAME TABLE gw.a TO gw.b", "c")
    with pytest.raises(ValueError, match="identifier"):
        render("DROP TABLE gw.a", "c; DROP DATABASE gw")


def test_distributed_tables_need_a_cluster_and_a_cluster_name_is_an_identifier() -> None:
    with pytest.raises(ValidationError, match="distributed needs a cluster"):
        ClickHouseSettings(distributed=True)
    with pytest.raises(ValidationError, match="cluster"):
        ClickHouseSettings(cluster="c ON CLUSTER x")
    assert ClickHouseSettings(cluster="main", distributed=True).cluster == "main"


def test_a_migration_that_copies_rows_is_refused_on_a_cluster_of_several_shards() -> None:
    """Its INSERT ... SELECT would copy one shard while its EXCHANGE and DROP run on every node."""
    client = RecordingClient(shards=2)
    with pytest.raises(ConfigError, match="011_time_keyed_tables copies rows and cluster 'gw_cluster' has 2"):
        apply_migrations(client, "gw", 30, ddl_dir(), cluster="gw_cluster")
    assert not any("evaluations_v011" in c for c in client.commands)  # refused before its first statement


def test_one_worker_at_a_time_applies_migrations_to_a_shared_server() -> None:
    """The lock table is created by exactly one worker; another waits (on the given sleep) until it is
    dropped, then finds nothing left to apply."""
    from streams.clickhouse.migrations import LOCK_TABLE, _acquire_lock

    class Busy(RecordingClient):
        def __init__(self, busy_for: int) -> None:
            super().__init__()
            self.busy_for = busy_for

        def command(self, sql: str) -> None:
            if sql.startswith(f"CREATE TABLE gw.{LOCK_TABLE}") and self.busy_for > 0:
                self.busy_for -= 1
                raise RuntimeError(f"Code: 57. DB::Exception: Table gw.{LOCK_TABLE} already exists.")
            super().command(sql)

    client, waits = Busy(busy_for=3), []
    _acquire_lock(client, "gw", sleep=waits.append)
    assert len(waits) == 3 and client.commands[-1].startswith(f"CREATE TABLE gw.{LOCK_TABLE}")

    class Broken(RecordingClient):
        def command(self, sql: str) -> None:
            raise RuntimeError("Code: 497. DB::Exception: not enough privileges")

    with pytest.raises(RuntimeError, match="privileges"):  # not a held lock: no waiting
        _acquire_lock(Broken(), "gw", sleep=waits.append)

    shared = RecordingClient()
    apply_migrations(shared, "gw", 30, ddl_dir(), shared=True)
    assert shared.commands[2].startswith(f"CREATE TABLE gw.{LOCK_TABLE}")
    assert any(c == f"DROP TABLE IF EXISTS gw.{LOCK_TABLE}" for c in shared.commands)
