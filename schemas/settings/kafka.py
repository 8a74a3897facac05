"""Kafka connection, topics and stream processing (``GROUNDWATCH_KAFKA__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from schemas.settings.common import variable_name


class KafkaSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    broker: str = Field(
        "kafka://127.0.0.1:9092",
        description="bootstrap servers, faust style: kafka://h1:9092;kafka://h2:9092",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description=(
            "security (production Kafka, MSK, Redpanda Cloud): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
        ),
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        "PLAIN", description="SASL mechanism (with SASL_PLAINTEXT or SASL_SSL)"
    )
    sasl_username: str | None = Field(None, description="SASL user name")
    sasl_password: SecretStr | None = Field(None, description="SASL password (a secret)")
    ssl_cafile: Path | None = Field(None, description="None: the system's CA bundle")
    ssl_certfile: Path | None = Field(None, description="client certificate (mutual TLS)")
    ssl_keyfile: Path | None = Field(None, description="private key of the client certificate (mutual TLS)")
    topic_prefix: str = Field(
        "groundwatch.",
        max_length=200,
        pattern=r"^[A-Za-z0-9._-]*$",
        description=(
            "prefix of every topic name (interactions, converted, judged, evaluations, alerts, deadletter); "
            "letters, digits, '.', '_' and '-' only, as Kafka topic names allow"
        ),
    )
    partitions: int = Field(
        4, ge=1, description="partitions of every topic (co-partitioned by interaction_id)"
    )
    replicas: int = Field(1, ge=1, description="replication factor of the topics groundwatch creates")
    consumer_group: str = Field(
        "groundwatch",
        description="Kafka consumer group of the workers (workers in one group share the partitions)",
    )
    stage_concurrency: int = Field(
        128,
        ge=1,
        description=(
            "interactions in flight inside each processor (and the default concurrency of groundwatch eval); "
            "grouped NLI sends ~4 interactions a call, so filling the judge's max_in_flight takes several "
            "times as many interactions in flight"
        ),
    )
    join_timeout_s: float | None = Field(
        None,
        gt=0,
        description=(
            "how long the join waits for an interaction's parts before it emits what it has (incomplete). "
            "None "
            "(the default): derived at start from the judge's worst case for one call, see "
            "``streams.join.join_timeout``: 2 x ((max_retries + 1) x timeout_s + the backoffs) for an HTTP "
            "judge, 2 x local_timeout_s for the local one, at least 120 s. A set value under that worst "
            "case is"
            " used but logged as a warning (late parts still complete the Evaluation: see join_emitted_cache)"
        ),
    )
    join_emitted_cache: int = Field(
        10_000,
        ge=0,
        description=(
            "Converted of interactions emitted recently (LRU, by interaction_id): a part that arrives after"
            " its"
            " interaction was emitted incomplete rebuilds and re-emits the complete Evaluation"
        ),
    )
    max_message_bytes: int = Field(
        1_048_576,
        ge=65_536,
        description=(
            "largest message the worker produces (the producer's max_request_size); keep it at or under "
            "the broker's message.max.bytes. A limit that lets one text alone (question, answer or ground "
            "truth: each goes into the converted message twice, as written and cut into sentences) make a "
            "larger message stops the worker at start; a message that is larger all the same is "
            "dead-lettered saying so"
        ),
    )
    deadletter_max_bytes: int = Field(
        256_000,
        ge=1024,
        description=(
            "a dead letter's payload over this many bytes (UTF-8) is cut to this budget (its prefix, with "
            "the "
            "sha256 and byte length of the whole); the original interaction is dropped when over it. Keep it "
            "well under the broker's max message size (1 MB by default)"
        ),
    )
    deadletter_attempts: int = Field(
        5,
        ge=1,
        description=(
            "attempts (with backoff) to send what must not be lost: an Evaluation the join cannot send is "
            "then dead-lettered; a dead letter that cannot be sent (the producer fails) is then given up "
            "and its message acked with an ERROR log naming its topic, partition and offset, so one "
            "message never blocks its partition for ever"
        ),
    )
    start_offset: Literal["latest", "earliest"] = Field(
        "latest",
        description=(
            "where a new consumer group starts reading the input topics (interactions, otlp, otlp_logs): "
            "latest = only what is produced from its first start on; earliest = everything the topic retains "
            "(every retained interaction is judged again). A group that has committed offsets resumes "
            "from them either way; the topics between stages are always read from their start"
        ),
    )
    session_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Kafka consumer session timeout (faust's default; the embedded broker of the demo and "
        "tests uses 6, groundwatch.local.tansu.worker_env)",
    )
    heartbeat_interval_s: float = Field(
        3.0, gt=0, description="Kafka consumer heartbeat interval; under session_timeout_s"
    )
    rebalance_timeout_s: float = Field(
        60.0, gt=0, description="Kafka consumer group rebalance timeout (faust's default)"
    )
    web_port: int = Field(
        6066, ge=1, le=65535, description="port of the worker's web server (dashboard at /dashboard/)"
    )
    otlp_input: bool = Field(
        False,
        description="also read OpenTelemetry traces (OTLP/JSON export requests, as an OpenTelemetry "
        "Collector's Kafka exporter writes them with encoding otlp_json) from the topic <prefix>otlp",
    )
    otlp_logs_input: bool = Field(
        False,
        description="also read OpenTelemetry logs (OTLP/JSON, the Collector's Kafka logs exporter with "
        "encoding otlp_json) from the topic <prefix>otlp_logs: the GenAI events that carry a model call's "
        "messages when an instrumentation records them as log events; joined to their span by trace and "
        "span id when otlp_input is on too",
    )
    otlp_hold_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long the pieces of one OpenTelemetry trace (its model calls' spans and log records, "
        "its tool spans, its other spans, its retrieved passages) are held waiting for the rest (its root "
        "span, each call's content) when they arrive apart; then its final answer is evaluated with what "
        "came (a tool call without its result is a step without one), or its calls dead-lettered (stage "
        "otlp) with the reason. Its export requests are acked only then, so this also delays their commit",
    )
    otlp_http_max_bytes: int = Field(
        1_000_000,
        ge=1024,
        description="largest OTLP/HTTP request body the worker's web server takes on POST /v1/traces and "
        "/v1/logs (as sent, unpacked from gzip, and as the OTLP/JSON message produced to Kafka; the broker's "
        "and the producer's message size limits must allow it); larger ones are answered 413",
    )
    web_enabled: bool = Field(
        False,
        description=(
            "faust's HTTP server (on dashboard.host:web_port): serves the built-in dashboard at /dashboard/"
        ),
    )
    commit_interval_s: float = Field(1.0, gt=0, description="how often processed offsets are committed")
    topic_check_seconds: float = Field(
        5.0,
        gt=0,
        description=(
            "how often the worker checks that its topics still exist on the broker with the partitions "
            "they had; when they are gone or changed at two checks in a row (a broker restarted with "
            "empty storage) the worker stops with one line and exit code 2, so that its supervisor "
            "restarts it (a new start recreates the topics)"
        ),
    )
    shutdown_timeout_s: float = Field(
        30.0,
        gt=0,
        description=(
            "a stop (SIGTERM or SIGINT) still running after this many seconds ends the process with one "
            "line and exit code 2; events not acked yet are read again at the next start"
        ),
    )
    producer_linger_s: float = Field(
        0.005, ge=0, description="batch a stage's outputs this long before sending"
    )
    fetch_max_wait_s: float = Field(
        0.1,
        gt=0,
        le=30,
        description=(
            "longest a consumer fetch waits on the broker for new messages (faust's own is 1.5 s); a broker "
            "that does not answer a waiting fetch early when messages arrive (the embedded Tansu) adds up to "
            "this much latency to every topic hop; a broker that does (Kafka) only answers idle fetches "
            "this often"
        ),
    )
    topology: Literal["staged", "fused"] = Field(
        "fused",
        description=(
            '"fused": one processor runs every stage of an interaction (interactions -> evaluations), two '
            'Kafka messages an interaction; "staged": convert -> judge (NLI and refusal) -> join, one topic '
            "a hop, eight messages an interaction (the stages scale apart). Stages fail apart in both: a "
            "failed NLI or refusal stage is dead-lettered and the Evaluation stored incomplete"
        ),
    )
    processes: int | None = Field(
        None,
        ge=1,
        le=64,
        description=(
            "processes of a worker (fused topology; the staged topology runs in one): with one, it judges "
            "and writes; with more, this one writes ClickHouse, closes windows and serves the web server and "
            "the others judge, members of the consumer group that read the interactions topic alone. None: "
            "one per CPU core this process may use (its CPU affinity and cgroup quota), one with the local "
            "model as the judge (its server uses the cores); each process holds its own judge client and "
            "memory. groundwatch eval judges on as many (--processes)"
        ),
    )
    datadir: Path | None = Field(
        None, description="faust's data directory; None: a temporary directory per worker"
    )

    @model_validator(mode="after")
    def _processes_judge_fused(self) -> KafkaSettings:
        if self.processes is not None and self.processes > 1 and self.topology != "fused":
            raise ValueError(
                f"{variable_name('kafka', 'processes')}={self.processes} needs "
                f"{variable_name('kafka', 'topology')}=fused (the staged topology judges in one process)"
            )
        return self

    @model_validator(mode="after")
    def _heartbeat_within_session(self) -> KafkaSettings:
        if self.heartbeat_interval_s >= self.session_timeout_s:
            raise ValueError(
                f"{variable_name('kafka', 'heartbeat_interval_s')} ({self.heartbeat_interval_s}) must be "
                f"under {variable_name('kafka', 'session_timeout_s')} ({self.session_timeout_s})"
            )
        return self
