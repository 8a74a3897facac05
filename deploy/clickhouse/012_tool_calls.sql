-- groundwatch schema v12: tool calls (docs/input.md "Agents and tools").

-- per interaction: its current question's tool calls, whether one failed, whether an answer with a factual
-- statement had no evidence at all, whether a tool argument value appeared nowhere before the call
-- (schemas/evaluation.py); NULL in rows written before v12 and where not known
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS tool_calls Nullable(UInt32) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS tool_error Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS no_evidence Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS ungrounded_arguments Nullable(UInt8) DEFAULT NULL;

-- per window: each metric's value, denominator and (rates) events, as schemas/metrics.py declares them
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS mean_tool_calls Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS tool_calls_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS tool_error_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS tool_error_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS tool_errors UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS no_evidence_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS no_evidence_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS no_evidence_answers UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ungrounded_arguments_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS ungrounded_arguments_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ungrounded_arguments_events UInt64 DEFAULT 0;
