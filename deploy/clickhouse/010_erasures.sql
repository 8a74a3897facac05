-- groundwatch erase: one row per erasure (what was asked, which interactions, how many rows per table),
-- kept for clickhouse.aggregate_ttl_days; it records ids, never texts
CREATE TABLE IF NOT EXISTS ${database}.erasures
(
    erasure_id String,
    erased_at DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    target String,
    interaction_ids Array(String),
    rows Map(String, UInt64),
    total_rows UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY erasure_id;
