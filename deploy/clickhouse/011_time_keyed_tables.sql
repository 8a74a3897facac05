-- groundwatch schema v11: the tables read by time are laid out by time (docs/capacity.md, "Table layout").
--
-- evaluations and evaluation_statements: PARTITION BY month of the interaction's event time, sorted by app,
-- model, event day and, last, the interaction id. A one-hour read of one app and model then touches the
-- granules of that app, model and day (the primary key prunes them) instead of every granule of the
-- table; retention drops whole parts (ttl_only_drop_parts) instead of rewriting them.
--
-- The key holds the day, not the timestamp, so one interaction id keeps one row per app, model and day:
-- a replay or redelivery counts once, and so does a message sent again with the same id later that day (a
-- regenerated answer): the version column decides which copy stays, as before. The event time comes from
-- the producer or, when the message has none, the time the worker read it (Kafka's record timestamp,
-- the same for every redelivery of that record; `groundwatch replay` stamps its produce time). The same
-- id on another day, app or model is another row. (A key on the exact timestamp would also let a
-- one-hour read skip the rest of the day, but would store an answer regenerated a second later twice.)
--
-- window_aggregates already sorts by (app, model, window_start): it only gains the monthly partition.
-- dead_letters keeps ORDER BY dead_letter_id: a message dead-lettered again after a redelivery has a
-- new failed_at, so no time of its can be part of the key without counting it twice.
--
-- Existing rows are copied: a new table with the new layout and the old one's columns (whatever columns
-- earlier migrations added), every row inserted, the two swapped atomically (EXCHANGE TABLES needs an
-- Atomic database, ClickHouse's default since 20.10), the old one dropped. Run it with every worker
-- stopped: rows written to the old table during the copy would be lost. It took 49 s for 1,000,000
-- evaluations on 2 busy cores (docs/capacity.md, "Table layout", has the command).

DROP TABLE IF EXISTS ${database}.evaluations_v011;
CREATE TABLE ${database}.evaluations_v011 AS ${database}.evaluations
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (app, model, toDate(timestamp), interaction_id)
SETTINGS ttl_only_drop_parts = 1;
-- a read by interaction id alone (the drill-down, the join's "already stored?", labels) skips granules
ALTER TABLE ${database}.evaluations_v011
    ADD INDEX IF NOT EXISTS interaction_bloom interaction_id TYPE bloom_filter(0.01) GRANULARITY 1;
INSERT INTO ${database}.evaluations_v011 SELECT * FROM ${database}.evaluations;
EXCHANGE TABLES ${database}.evaluations AND ${database}.evaluations_v011;
DROP TABLE ${database}.evaluations_v011;

DROP TABLE IF EXISTS ${database}.evaluation_statements_v011;
CREATE TABLE ${database}.evaluation_statements_v011 AS ${database}.evaluation_statements
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (app, model, toDate(timestamp), interaction_id, pair, hypothesis_index, statement_index)
SETTINGS ttl_only_drop_parts = 1;
ALTER TABLE ${database}.evaluation_statements_v011
    ADD INDEX IF NOT EXISTS interaction_bloom interaction_id TYPE bloom_filter(0.01) GRANULARITY 1;
INSERT INTO ${database}.evaluation_statements_v011 SELECT * FROM ${database}.evaluation_statements;
EXCHANGE TABLES ${database}.evaluation_statements AND ${database}.evaluation_statements_v011;
DROP TABLE ${database}.evaluation_statements_v011;

DROP TABLE IF EXISTS ${database}.window_aggregates_v011;
CREATE TABLE ${database}.window_aggregates_v011 AS ${database}.window_aggregates
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(window_start)
ORDER BY (app, model, window_start)
SETTINGS ttl_only_drop_parts = 1;
INSERT INTO ${database}.window_aggregates_v011 SELECT * FROM ${database}.window_aggregates;
EXCHANGE TABLES ${database}.window_aggregates AND ${database}.window_aggregates_v011;
DROP TABLE ${database}.window_aggregates_v011;
