-- groundwatch schema v17: conversations. turns_stored_at: when the latest turn a rollup was computed from
-- was stored (the evaluations' inserted_at, the ClickHouse server's clock). A turn stored after it (a late
-- turn, or a complete evaluation replacing an incomplete one: the same number of turns) makes the rollup
-- stale, and the next start rolls the conversation up again (streams/clickhouse/conversations.py). NULL on
-- rows written before this column existed.
ALTER TABLE ${database}.conversations
    ADD COLUMN IF NOT EXISTS turns_stored_at Nullable(DateTime64(3, 'UTC'));

-- who decided a conversation's re-asks and contradictions, and what the LLM judge's checks of them cost
-- (conversations.judge llm: pipeline/conversation_judge.py)
ALTER TABLE ${database}.conversations
    ADD COLUMN IF NOT EXISTS pair_judge LowCardinality(String) DEFAULT 'lexical',
    ADD COLUMN IF NOT EXISTS judge_calls UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS judge_input_tokens UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS judge_output_tokens UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS judge_cost_usd Float64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS judge_failure String DEFAULT '';

-- an interaction without a conversation_id is a conversation of one turn with a row of its own, keyed by
-- its interaction_id (conversation_id ''); '' on the rows of conversations. The windows count those
-- interactions from evaluations, and read only the rows with interaction_id ''. The erasure of an
-- interaction deletes its row with its other rows (streams/clickhouse/erase.py: every table with an
-- interaction_id column).
ALTER TABLE ${database}.conversations
    ADD COLUMN IF NOT EXISTS interaction_id String,
    MODIFY ORDER BY (app, model, conversation_id, interaction_id);
