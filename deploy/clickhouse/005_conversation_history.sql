-- groundwatch schema v5: conversations. An interaction may carry the turns before its question (its
-- history, schemas/interaction.py); the turns themselves travel in the evaluation's payload (JSON, with
-- the interaction), these columns make them countable without parsing it: how many turns were kept, and
-- whether the oldest were dropped to fit the limits (max_history_turns, max_history_chars). Rows from
-- before v5 had no history: 0 and 0
ALTER TABLE ${database}.evaluations
    ADD COLUMN IF NOT EXISTS history_turns UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS history_truncated UInt8 DEFAULT 0;
