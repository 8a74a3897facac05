-- groundwatch schema v7: people's labels and the judge's identity (docs/trust.md).

-- one row per (interaction, label kind, reviewer): the latest label wins (version = labeled_at in ms).
-- statements: the reviewer's per-statement verdicts as JSON ([] when none were given);
-- inclusion_probability: the review queue's chance of drawing the interaction (NULL: weight 1)
CREATE TABLE IF NOT EXISTS ${database}.labels
(
    interaction_id String,
    kind LowCardinality(String),
    reviewer String,
    value UInt8,
    source LowCardinality(String),
    labeled_at DateTime64(3, 'UTC'),
    note Nullable(String),
    statements String CODEC(ZSTD(3)),
    inclusion_probability Nullable(Float64),
    inserted_at DateTime64(3, 'UTC') DEFAULT now64(3),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (interaction_id, kind, reviewer);

-- which judge model and prompt version produced an evaluation: agreement is measured per judge identity,
-- so a provider's model update or a prompt change starts a series of its own. Rows before v7: ''
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS judge_model LowCardinality(String) DEFAULT '' AFTER judge,
    ADD COLUMN IF NOT EXISTS prompt_version LowCardinality(String) DEFAULT '' AFTER judge_model;
