-- groundwatch schema v16: answerability and refusal groundedness (docs/answerability.md).

-- per interaction: whether the question is answerable from its documents and what decided it (label,
-- ground_truth, contexts, unknown), and the Trust-Eval case flags it gives with the answer's refusal flag,
-- each NULL outside its figure's denominator (schemas/evaluation.py); NULL ('unknown') in rows written
-- before v16
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS answerable Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answerable_source LowCardinality(String) DEFAULT 'unknown',
    ADD COLUMN IF NOT EXISTS over_refusal Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answered_unanswerable Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS refused_unanswerable Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answered_answerable Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS justified_refusal Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS justified_answer Nullable(UInt8) DEFAULT NULL;

-- per window: each metric's value, denominator and events, as schemas/metrics.py declares them
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS over_refusal_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answered_unanswerable_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS reject_recall Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS reject_precision Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answerable_recall Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answerable_precision Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS answerable_questions UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS unanswerable_questions UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS refusals_answerability_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS answers_answerability_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS over_refusals UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS answerable_answered UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS unanswerable_answered UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS unanswerable_refused UInt64 DEFAULT 0;
