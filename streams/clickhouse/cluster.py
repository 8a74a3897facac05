"""DDL for a ClickHouse cluster (``clickhouse.cluster``): every statement ``ON CLUSTER``, replicated engines.

The migrations in deploy/clickhouse are written for one server. With a cluster name set, each DDL statement
is rendered for the cluster before it runs: ``ON CLUSTER <name>`` after the object it creates, alters,
drops or swaps, and each ``MergeTree`` family engine becomes its ``Replicated`` one, its replica path
``/clickhouse/tables/{uuid}/{shard}`` and name ``{replica}`` (macros every node defines in its
configuration; ``{uuid}`` is the table's, which an ``ON CLUSTER`` CREATE gives every replica alike, so a
table created again under an old name never meets its predecessor's path). ``INSERT ... SELECT`` (migration
011's copy) runs on the node the worker is connected to; a replicated table passes it to its replicas.

ClickHouse Cloud needs none of this: its databases replicate DDL and its MergeTree tables are
SharedMergeTree, so leave ``clickhouse.cluster`` unset there.

With ``clickhouse.distributed`` the worker also keeps a ``Distributed`` table ``<table>_all`` per table
(created again at every start, so it has the columns the migrations added), to read a cluster of several
shards from one place (Grafana, SQL). The worker itself writes and reads its node's tables.
"""

from __future__ import annotations

import re

from schemas.errors import ConfigError
from streams.clickhouse.client import check_identifier

#: where each replicated table keeps its state in (Zoo)Keeper, and the replica's name: server macros
REPLICA_PATH = "'/clickhouse/tables/{uuid}/{shard}', '{replica}'"

#: the tables read through ``<table>_all`` with ``clickhouse.distributed``
DISTRIBUTED_TABLES = (
    "evaluations",
    "evaluation_statements",
    "window_aggregates",
    "alerts",
    "alert_deliveries",
    "dead_letters",
    "labels",
    "conversations",
)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?"
_OBJECT = re.compile(
    r"^(CREATE (?:OR REPLACE )?(?:TABLE|VIEW|DATABASE)(?: IF NOT EXISTS)?"
    rf"|ALTER TABLE|DROP TABLE(?: IF EXISTS)?|EXCHANGE TABLES {_NAME} AND) ({_NAME})(?=\s|$)",
    re.IGNORECASE,
)
_ENGINE = re.compile(
    r"\bENGINE\s*=\s*(Replacing|Summing|Aggregating|Collapsing)?MergeTree\b(\s*\(([^()]*)\))?"
)


class ClusterRenderError(ConfigError):
    """A DDL statement this module does not know how to run on a cluster."""


def _replicated(match: re.Match[str]) -> str:
    family = match.group(1) or ""
    args = (match.group(3) or "").strip()
    return f"ENGINE = Replicated{family}MergeTree({REPLICA_PATH}{', ' + args if args else ''})"


def render(statement: str, cluster: str | None) -> str:
    """``statement`` as it runs on ``cluster`` (unchanged without one). Raises ClusterRenderError for a
    DDL statement of a form it does not know, rather than run it on one node only."""
    if cluster is None:
        return statement
    name = check_identifier(cluster)
    text = statement.strip()
    if re.match(r"^INSERT\b", text, re.IGNORECASE):
        return text
    m = _OBJECT.match(text)
    if not m:
        raise ClusterRenderError(f"cannot run on a cluster (no ON CLUSTER form known): {text[:80]!r}")
    text = f"{text[: m.end()]} ON CLUSTER {name}{text[m.end() :]}"
    return _ENGINE.sub(_replicated, text)


def distributed_tables(database: str, cluster: str) -> list[str]:
    """``CREATE OR REPLACE`` of the ``<table>_all`` Distributed tables that read every shard's ``<table>``."""
    db, name = check_identifier(database), check_identifier(cluster)
    return [
        f"CREATE OR REPLACE TABLE {db}.{table}_all ON CLUSTER {name} AS {db}.{table} "
        f"ENGINE = Distributed({name}, {db}, {table})"
        for table in DISTRIBUTED_TABLES
    ]
