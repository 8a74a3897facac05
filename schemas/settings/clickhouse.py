"""ClickHouse connection, retention and sink (``GROUNDWATCH_CLICKHOUSE__*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class ClickHouseSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: SecretStr = Field(
        SecretStr("chdb:///" + str(Path.cwd() / ".groundwatch" / "chdb")),
        description=(
            "chdb:///abs/path (embedded) or http(s)://user:password@host:port/database; a secret (the URL "
            "carries the password): repr() and logs never show it, pass it via the environment"
        ),
    )
    ttl_days: int = Field(
        90,
        ge=0,
        description=(
            "retention of the tables that hold texts or point at one interaction (evaluations, "
            "evaluation_statements, dead_letters, labels), counted from when a row was written; 0: kept "
            "until erased"
        ),
    )
    aggregate_ttl_days: int = Field(
        395,
        ge=0,
        description=(
            "retention of the tables without texts (window_aggregates, alerts, alert_deliveries, erasures), "
            "counted from when a row was written; 0: kept until erased"
        ),
    )
    store_payload: bool = Field(
        True,
        description=(
            "keep the texts: the evaluation's JSON with its interaction (payload), the statements, the "
            "unsupported claims; false: scores, flags, counts and statement verdicts without any text"
        ),
    )
    batch_rows: int = Field(500, ge=1, description="evaluations buffered before a ClickHouse insert")
    batch_seconds: float = Field(
        0.25,
        gt=0,
        description=(
            "longest an evaluation waits in the buffer before an insert (checked 4 times as often); under "
            "load batches fill to batch_rows first"
        ),
    )
    insert_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description=(
            "the share of the time inserts may take: after a flush that took d seconds, a batch that is not "
            "full waits d x (1 - share) / share more (at most 5 s) on top of batch_seconds, so under load "
            "batches grow until their inserts take this share (ClickHouse, chDB above all, pays a fixed "
            "cost an insert); 1: batch_seconds alone"
        ),
    )
    database: str = Field(
        "groundwatch", description="used when the URL names none (chdb:///path, http://host:8123)"
    )
    status_file: Path | None = Field(
        None,
        description=(
            "the worker writes its table counts here after its writes (JSON), at most every status_every_s: "
            "how a demo or a test follows an embedded chDB that only the worker's process may open"
        ),
    )
    status_every_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description=(
            "the status file is rewritten at most this often (its counts are deduplicated counts of every "
            "table, which cost more as the tables grow); a write that comes sooner waits for this much time "
            "to pass, and the last one is always made"
        ),
    )
    migrations_dir: Path | None = Field(
        None, description="versioned DDL (NNN_name.sql); None: the repository's deploy/clickhouse"
    )
    sink_max_failures: int = Field(
        5,
        ge=1,
        description=(
            "a batch that fails this many flushes in a row is split in halves to find the row ClickHouse "
            'rejects; that row goes to deadletter (stage "sink") and the rest are written'
        ),
    )
    dead_letter_batch_rows: int = Field(
        500,
        ge=1,
        description="dead-letter rows buffered before a ClickHouse insert (each letter is acked once the "
        "insert holding its row succeeded)",
    )
    dead_letter_batch_seconds: float = Field(
        0.5,
        gt=0,
        description="longest a dead-letter row waits in the buffer before an insert (checked 4 times as "
        "often); a flood fills batches to dead_letter_batch_rows first",
    )
    cluster: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "a ClickHouse cluster name (remote_servers): migrations run ON CLUSTER with Replicated engines "
            "(macros {shard}, {replica}); None: one server, or ClickHouse Cloud (SharedMergeTree: no "
            "cluster needed)"
        ),
    )
    distributed: bool = Field(
        False,
        description=(
            "with cluster: also keep a Distributed table <table>_all per table, to read every shard from "
            "one place; the worker writes and reads its node's tables"
        ),
    )

    @model_validator(mode="after")
    def _distributed_needs_cluster(self) -> ClickHouseSettings:
        if self.distributed and self.cluster is None:
            raise ValueError("distributed needs a cluster (set clickhouse.cluster)")
        return self
