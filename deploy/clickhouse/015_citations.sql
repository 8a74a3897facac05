-- groundwatch schema v15: citations (docs/citations.md).

-- per interaction: the answer's citation figures (schemas/evaluation.py, pipeline/metrics/citations.py);
-- NULL where the answer cites nothing, is a refusal, was not judged, and in rows written before v15
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS citation_recall Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS citation_precision Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS uncited_statements Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS miscited Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS dangling_citations Nullable(UInt32) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS dangling_citation Nullable(UInt8) DEFAULT NULL;

-- per statement (context pair of an answer that cites; StatementVerdict.citations): the evidence passages
-- its sentence cites (0-based indices, as passage), per cited passage whether it supports the statement
-- (1) or not (0; [] where the judge named no supporting passages), whether the cited passages support
-- it (NULL: it cites none, or unknown), its references that name no passage, the document name of each
-- cited passage ('' for one without a name), and the passages that support it (supported_by; [] where
-- not asked)
ALTER TABLE ${database}.evaluation_statements
    ADD COLUMN IF NOT EXISTS cited_passages Array(UInt16) DEFAULT [],
    ADD COLUMN IF NOT EXISTS cited_precise Array(UInt8) DEFAULT [],
    ADD COLUMN IF NOT EXISTS citation_supported Nullable(UInt8) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS dangling_citations Array(String) DEFAULT [],
    ADD COLUMN IF NOT EXISTS cited_documents Array(String) DEFAULT [],
    ADD COLUMN IF NOT EXISTS supported_by Array(UInt16) DEFAULT [];

-- per window: each metric's value, denominator and (rates) events, as schemas/metrics.py declares them
ALTER TABLE ${database}.window_aggregates
    ADD COLUMN IF NOT EXISTS mean_citation_recall Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS citation_recall_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS mean_citation_precision Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS citation_precision_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS mean_uncited_statements Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS uncited_statements_scored UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS miscited_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS miscited_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS miscited_answers UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS dangling_citation_rate Nullable(Float64) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS dangling_citation_known UInt64 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS dangling_citation_answers UInt64 DEFAULT 0;

-- the view lists the columns it was created with: created again, it has the new ones
CREATE OR REPLACE VIEW ${database}.evaluation_statements_current AS
SELECT *
FROM ${database}.evaluation_statements FINAL
WHERE (interaction_id, version) IN (SELECT interaction_id, version FROM ${database}.evaluations FINAL);
