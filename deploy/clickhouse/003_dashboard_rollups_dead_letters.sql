-- groundwatch schema v3: what the dashboards read without touching per-interaction rows.

-- grounded-unit precision per window (its mean and denominator), and the judge call latencies of a window
-- as counts per fixed log-spaced bucket (schemas/latency.py: LATENCY_BUCKET_EDGES_MS): bucket counts add
-- up across windows (sumForEach), so an hour or a day gets its p50/p95 from its windows, not from the
-- interactions
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS mean_grounded_precision Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS grounded_precision_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS judge_latency_histogram Array(UInt64) DEFAULT [];

-- every dead letter the workers sent, one row each (dead_letter_id = sha256 of its content: a redelivered
-- dead letter replaces itself); app and model are set when the message carried them
CREATE TABLE IF NOT EXISTS ${database}.dead_letters
(
    dead_letter_id String,
    failed_at DateTime64(3, 'UTC'),
    stage LowCardinality(String),
    error_type LowCardinality(String),
    error String,
    source_topic LowCardinality(String),
    interaction_id Nullable(String),
    app LowCardinality(String),
    model LowCardinality(String),
    payload_bytes UInt64,
    truncated UInt8,
    inserted_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX failed_minmax failed_at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree
ORDER BY dead_letter_id;
