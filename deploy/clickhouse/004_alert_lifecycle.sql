-- groundwatch schema v4: the alert lifecycle (firing, then resolved) and the delivery ledger.

-- one row per transition: the firing's alert_id is the incident's id, the resolution's is that id +
-- '|resolved'; rows from before v4 are firings of threshold rules
ALTER TABLE ${database}.alerts
    ADD COLUMN IF NOT EXISTS state LowCardinality(String) DEFAULT 'firing',
    ADD COLUMN IF NOT EXISTS kind LowCardinality(String) DEFAULT 'threshold',
    ADD COLUMN IF NOT EXISTS incident_id String DEFAULT '',
    ADD COLUMN IF NOT EXISTS starts_at Nullable(DateTime64(3, 'UTC')) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS ends_at Nullable(DateTime64(3, 'UTC')) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS baseline Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS baseline_interactions UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS severity LowCardinality(String) DEFAULT 'warning';

-- the delivery ledger: one notification per transition and receiver, however many workers. A worker
-- claims a delivery (one row per claimant), then reads the claims back: the first to arrive (inserted,
-- then claimant) sends, the others skip; the winner then replaces its row with the outcome (status delivered or failed,
-- attempts, last error), so failed deliveries stay queryable. A claim row's updated_at is the epoch, so
-- an outcome always replaces it and a later claim never replaces an outcome
CREATE TABLE IF NOT EXISTS ${database}.alert_deliveries
(
    delivery_id String,
    alert_id String,
    receiver LowCardinality(String),
    claimant String,
    claimed_at DateTime64(3, 'UTC'),
    status LowCardinality(String),
    attempts UInt32,
    error String,
    updated_at DateTime64(3, 'UTC'),
    -- the server's clock at insert: orders the claims as they arrived, whatever the workers' clocks say
    inserted DateTime64(9, 'UTC') DEFAULT now64(9)
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (delivery_id, claimant);
