-- groundwatch schema v9: the documents behind answer statements, and questions that repeat.

-- the passage each answer statement was judged against (StatementVerdict.passage: the index of the
-- interaction's context; NULL in the ground-truth pairs, where the judge could not say, and in rows
-- written before v9) and that passage's document name ('' for a passage without one)
ALTER TABLE ${database}.evaluation_statements
    ADD COLUMN IF NOT EXISTS passage Nullable(UInt16) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS document Nullable(String) DEFAULT NULL;

-- the distinct document names of an interaction's retrieved (non-blank) passages, '' for a passage
-- without a name, so retrievals count without parsing the payload; and a hash of its question (case and
-- spacing folded) so the same question can be matched across slices. Rows before v9: [] and 0
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS context_documents Array(String) DEFAULT [],
    ADD COLUMN IF NOT EXISTS question_hash UInt64 DEFAULT 0;

-- the view lists the columns it was created with: created again, it has the new ones
CREATE OR REPLACE VIEW ${database}.evaluation_statements_current AS
SELECT *
FROM ${database}.evaluation_statements FINAL
WHERE (interaction_id, version) IN (SELECT interaction_id, version FROM ${database}.evaluations FINAL);
