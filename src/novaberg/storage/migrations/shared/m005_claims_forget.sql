-- m005_claims_forget: an event is claimed before it runs (by whom, until when: a claim whose
-- lease ran out, or whose process died, can be taken again); a turn names the turn whose
-- self-trigger started it (so that forgetting one reaches the other), and says when its words
-- were forgotten (such a turn is never sent as history again).
ALTER TABLE events ADD COLUMN claimed_by TEXT;
ALTER TABLE events ADD COLUMN claimed_until TEXT;
ALTER TABLE turns ADD COLUMN parent_turn_id {{ref}} REFERENCES turns(id);
ALTER TABLE turns ADD COLUMN forgotten_at TEXT;
-- Second passes stored before this migration: the user turn before them with the same text.
UPDATE turns SET parent_turn_id = (
    SELECT MAX(p.id) FROM turns p
    WHERE p.conversation_id = turns.conversation_id AND p.id < turns.id
      AND p.origin = 'user' AND p.user_text = turns.user_text
) WHERE origin = 'self_trigger';
UPDATE turns SET forgotten_at = COALESCE(finished_at, started_at)
    WHERE user_text = '[forgotten at the user''s request]';
CREATE INDEX turns_by_parent ON turns(parent_turn_id);
