-- groundwatch schema v18: conversations. turns_digest: which stored turns a rollup was computed from (a hash
-- of their interaction ids and evaluation versions; pipeline/conversations.py turns_digest). A conversation
-- closed again with the same turns (a touch repeated by a redelivery, its work handed to a new owner) is
-- neither judged nor written again (streams/windows/conversations.py). '' on rows written before this
-- column existed and on the rows of interactions without a conversation_id.
ALTER TABLE ${database}.conversations
    ADD COLUMN IF NOT EXISTS turns_digest String DEFAULT '';
