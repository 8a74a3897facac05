-- groundwatch schema v8: slices (docs/slices.md, docs/architecture.md "Dimensions").

-- the dimensions of each evaluation: the configured metadata paths (dimensions.paths) and the built-ins
-- answer_length, has_ground_truth and turn, name -> value (pipeline/dimensions.py). One Map rather than a
-- column per dimension: the configured paths change without DDL. A dimension past
-- dimensions.max_values_per_day distinct values on a UTC day stores '(other)'. Rows before v8: {}
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS dimensions Map(LowCardinality(String), String) DEFAULT map() AFTER history_truncated;

-- an alert rule with group_by is evaluated per slice: the slice it fired on ('prompt_version=v2'; several
-- dimensions joined by ', '), '' for a rule without group_by. Rows before v8: ''
ALTER TABLE ${database}.alerts
    ADD COLUMN IF NOT EXISTS slice String DEFAULT '';
