-- groundwatch schema v13: your own evaluators (docs/evaluators.md, schemas/evaluators.py).

-- each evaluation's custom scores, by evaluator name: the score in [0, 1] (1 for a flag or a pass), the
-- reason of an evaluator that failed to score (timeout, an exception, an answer it could not read), and
-- the version each one scored with. Maps rather than a column per evaluator: evaluators come and go with
-- the evaluators file, not with DDL. The reasons of scores stay in the payload. Rows before v12: {}
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS custom_scores Map(LowCardinality(String), Float64) DEFAULT map();
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS custom_missing Map(LowCardinality(String), String) DEFAULT map();
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS custom_versions Map(LowCardinality(String), String) DEFAULT map();

-- each window's custom metrics, by evaluator name: the mean score over the interactions it scored (the
-- rate of a flag), how many it scored, how many it failed to score. The catalogue's custom.<name> pools
-- them as sum(custom_values[name] * custom_scored[name]) / sum(custom_scored[name]). Rows before v12: {}
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS custom_values Map(LowCardinality(String), Float64) DEFAULT map();
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS custom_scored Map(LowCardinality(String), UInt64) DEFAULT map();
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS custom_missing Map(LowCardinality(String), UInt64) DEFAULT map();
