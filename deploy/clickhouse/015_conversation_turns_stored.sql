-- groundwatch schema v15: when the latest turn a conversation's rollup was computed from was stored (the
-- evaluations' inserted_at, the ClickHouse server's clock). A turn stored after it (a late turn, or a
-- complete evaluation replacing an incomplete one: the same number of turns) makes the rollup stale, and
-- the next start rolls the conversation up again (streams/clickhouse/conversations.py). NULL on rows
-- written before this column existed.
ALTER TABLE ${database}.conversations
    ADD COLUMN IF NOT EXISTS turns_stored_at Nullable(DateTime64(3, 'UTC'));
