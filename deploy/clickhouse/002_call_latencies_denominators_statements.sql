-- groundwatch schema v2 (never edit an applied migration: add the next NNN_name.sql).

-- the latency of each judge call that reached a model (uncached, not lexical), so windows and dashboards
-- take quantiles over calls (arrayJoin) rather than over per-interaction sums
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS call_latencies_ms Array(Float64) DEFAULT [] AFTER judge_latency_ms;

-- the denominator of each rate and mean of a window (alert rules compare min_interactions with these)
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS answer_refusal_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ground_truth_refusal_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS context_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ground_truth_answer_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS answer_ground_truth_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS judge_latency_calls UInt64 DEFAULT 0;

-- statement-level detail of the evaluation that counts: a re-evaluation with fewer statements leaves the
-- old extra rows in evaluation_statements (its key is per statement index); this view keeps only the
-- statements written with the version of the interaction's current (deduplicated) evaluation. Read
-- statements through it.
CREATE VIEW IF NOT EXISTS ${database}.evaluation_statements_current AS
SELECT *
FROM ${database}.evaluation_statements FINAL
WHERE (interaction_id, version) IN (SELECT interaction_id, version FROM ${database}.evaluations FINAL);
