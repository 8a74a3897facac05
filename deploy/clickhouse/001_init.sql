-- groundwatch schema v1. Applied by the worker at start (streams/clickhouse/migrations.py), recorded in
-- ${database}.schema_migrations. ${database} is replaced by the configured (validated) database name.
-- Every table is a ReplacingMergeTree: writes are idempotent, so at-least-once delivery and replays never
-- count twice once queries read with FINAL (or argMax). Retention (TTL) is set from settings at start.

-- one row per interaction; version prefers a complete evaluation, then the latest
CREATE TABLE IF NOT EXISTS ${database}.evaluations
(
    interaction_id String,
    timestamp DateTime64(3, 'UTC'),
    evaluated_at DateTime64(3, 'UTC'),
    app LowCardinality(String),
    model LowCardinality(String),
    conversation_id Nullable(String),
    judge LowCardinality(String),
    context_entailment Nullable(Float64),
    ground_truth_entails_answer Nullable(Float64),
    answer_entails_ground_truth Nullable(Float64),
    answer_refusal Nullable(UInt8),
    ground_truth_refusal Nullable(UInt8),
    grounded_precision Nullable(Float64),
    hallucination Nullable(UInt8),
    relevance Nullable(Float64),
    unsupported_claims Array(String),
    judge_calls UInt32,
    input_tokens UInt64,
    output_tokens UInt64,
    cost_usd Float64,
    judge_latency_ms Float64,
    complete UInt8,
    missing Array(String),
    version UInt64,
    payload String CODEC(ZSTD(3)),
    -- when this copy was written: windows computed before it are stale (reconciled at worker start)
    inserted_at DateTime64(3, 'UTC') DEFAULT now64(3),
    -- windows read by event time, reconciliation by write time: skip granules outside the range
    INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1,
    INDEX inserted_minmax inserted_at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version)
ORDER BY interaction_id;

-- statement-level detail: one row per (interaction, pair, hypothesis, statement)
CREATE TABLE IF NOT EXISTS ${database}.evaluation_statements
(
    interaction_id String,
    timestamp DateTime64(3, 'UTC'),
    evaluated_at DateTime64(3, 'UTC'),
    app LowCardinality(String),
    model LowCardinality(String),
    pair LowCardinality(String),
    hypothesis_index UInt16,
    statement_index UInt16,
    hypothesis String,
    statement String,
    verdict LowCardinality(String),
    score Float64,
    tag LowCardinality(String),
    reason String,
    version UInt64,
    INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (interaction_id, pair, hypothesis_index, statement_index);

-- one row per tumbling window, app and model; a recomputation (late rows) replaces it
CREATE TABLE IF NOT EXISTS ${database}.window_aggregates
(
    window_start DateTime64(3, 'UTC'),
    window_end DateTime64(3, 'UTC'),
    app LowCardinality(String),
    model LowCardinality(String),
    count UInt64,
    mean_context_entailment Nullable(Float64),
    mean_ground_truth_entails_answer Nullable(Float64),
    mean_answer_entails_ground_truth Nullable(Float64),
    answered UInt64,
    hallucinations UInt64,
    hallucination_rate Nullable(Float64),
    answer_refusal_rate Nullable(Float64),
    ground_truth_refusal_rate Nullable(Float64),
    input_tokens UInt64,
    output_tokens UInt64,
    cost_usd Float64,
    judge_latency_p50_ms Nullable(Float64),
    judge_latency_p95_ms Nullable(Float64),
    incomplete UInt64,
    computed_at DateTime64(3, 'UTC'),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (app, model, window_start);

-- alerts that fired; alert_id = rule + app + model + window, so a re-evaluation never fires twice
CREATE TABLE IF NOT EXISTS ${database}.alerts
(
    alert_id String,
    rule LowCardinality(String),
    metric LowCardinality(String),
    app LowCardinality(String),
    model LowCardinality(String),
    value Float64,
    threshold Float64,
    op LowCardinality(String),
    windows UInt32,
    interactions UInt64,
    window_start DateTime64(3, 'UTC'),
    window_end DateTime64(3, 'UTC'),
    fired_at DateTime64(3, 'UTC'),
    message String
)
ENGINE = ReplacingMergeTree
ORDER BY alert_id;
