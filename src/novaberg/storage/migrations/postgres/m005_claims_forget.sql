-- m005_claims_forget (PostgreSQL): see sqlite/m005_claims_forget.sql.
ALTER TABLE events ADD COLUMN claimed_by TEXT;
ALTER TABLE events ADD COLUMN claimed_until TEXT;
ALTER TABLE turns ADD COLUMN parent_turn_id BIGINT REFERENCES turns(id);
ALTER TABLE turns ADD COLUMN forgotten_at TEXT;
UPDATE turns SET parent_turn_id = (
    SELECT MAX(p.id) FROM turns p
    WHERE p.conversation_id = turns.conversation_id AND p.id < turns.id
      AND p.origin = 'user' AND p.user_text = turns.user_text
) WHERE origin = 'self_trigger';
UPDATE turns SET forgotten_at = COALESCE(finished_at, started_at)
    WHERE user_text = '[forgotten at the user''s request]';
CREATE INDEX turns_by_parent ON turns(parent_turn_id);
