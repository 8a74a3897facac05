-- groundwatch schema v6: sampling and judge budgets (pipeline/sampling.py, docs/sampling.md).

-- an interaction the sampling rules or a judge budget skip is stored unjudged (no scores, no judge call)
-- with the reason; rows written before v6 were all judged
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS judged UInt8 DEFAULT 1 AFTER missing,
    ADD COLUMN IF NOT EXISTS skip_reason Nullable(String) DEFAULT NULL AFTER judged;

-- a window's interactions: count = received, judged = sent to the judge (the rates and means are over
-- judged ones only: skipped rows carry no score), skipped = the rest, and how many for each skip reason.
-- Windows written before v6 judged every interaction they counted
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS judged UInt64 DEFAULT count,
    ADD COLUMN IF NOT EXISTS skipped UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS skipped_by_reason Map(String, UInt64) DEFAULT map();
