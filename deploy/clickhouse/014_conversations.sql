-- groundwatch schema v14: conversations. One row per conversation (app, model, conversation_id), written
-- when it closes (pipeline/conversations.py, streams/windows/conversations.py) from its stored turns
-- (evaluations FINAL); a late turn reopens it and the row is written again with a higher version, so
-- redeliveries, restarts and out-of-order turns never count a conversation twice. Retention: like
-- evaluations (clickhouse.ttl_days, from written_at). Interactions without a conversation_id are
-- conversations of one turn counted by the windows directly, with no row here.
CREATE TABLE IF NOT EXISTS ${database}.conversations
(
    app LowCardinality(String),
    model LowCardinality(String),
    conversation_id String,
    first_turn_at DateTime64(3, 'UTC'),
    last_turn_at DateTime64(3, 'UTC'),
    turns UInt32,
    judged_turns UInt32,
    hallucinated_turns UInt32,
    refusals UInt32,
    reasked_turns UInt32,
    contradictions UInt32,
    ended UInt8,
    ended_unresolved UInt8,
    any_hallucinated UInt8,
    reasked UInt8,
    contradicted UInt8,
    input_tokens UInt64,
    output_tokens UInt64,
    cost_usd Float64,
    worst_turn_id String,
    unresolving_turn_id String,
    written_at DateTime64(3, 'UTC'),
    version UInt64,
    -- when the row was stored (the ClickHouse server's clock): a window computed before it (computed_at)
    -- may not count it, and is recomputed at the next start (streams/clickhouse/conversations.py)
    inserted_at DateTime64(3, 'UTC') DEFAULT now64(3),
    -- windows read conversations by their close time (the last turn's)
    INDEX last_turn_minmax last_turn_at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (app, model, conversation_id);

-- the turns of a conversation are read by its id
ALTER TABLE ${database}.evaluations
    ADD INDEX IF NOT EXISTS conversation_bloom conversation_id TYPE bloom_filter(0.01) GRANULARITY 1;

-- the conversation metrics of a window: the conversations whose last turn falls in it (schemas/metrics.py)
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS conversations UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS conversations_judged UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS conversations_hallucinated UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS conversations_unresolved UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS conversations_reasked UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS conversations_contradicted UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS conversation_hallucinated_rate Nullable(Float64),
    ADD COLUMN IF NOT EXISTS conversation_unresolved_rate Nullable(Float64),
    ADD COLUMN IF NOT EXISTS conversation_reask_rate Nullable(Float64),
    ADD COLUMN IF NOT EXISTS conversation_contradiction_rate Nullable(Float64),
    ADD COLUMN IF NOT EXISTS mean_turns_per_conversation Nullable(Float64);
