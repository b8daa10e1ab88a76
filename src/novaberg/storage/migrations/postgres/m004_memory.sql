-- m004_memory (PostgreSQL): see sqlite/m004_memory.sql; full-text search is a generated
-- tsvector with a GIN index ('simple' configuration: no language-specific stemming).
ALTER TABLE memories RENAME COLUMN score TO importance;
ALTER TABLE memories DROP CONSTRAINT memories_source_turn_id_kind_key;
ALTER TABLE memories ALTER COLUMN source_turn_id DROP NOT NULL;
ALTER TABLE memories ADD COLUMN item_key TEXT;
UPDATE memories SET item_key = 'turn:' || source_turn_id || ':' || kind;
ALTER TABLE memories ALTER COLUMN item_key SET NOT NULL;
ALTER TABLE memories ADD CONSTRAINT memories_user_key UNIQUE (user_id, item_key);
ALTER TABLE memories ADD CONSTRAINT memories_kind CHECK (kind IN ('short_term', 'long_term', 'event'));
ALTER TABLE memories ADD COLUMN source_message_id BIGINT REFERENCES messages(id);
ALTER TABLE memories ADD COLUMN derived_from TEXT NOT NULL DEFAULT '[]';
ALTER TABLE memories ADD COLUMN happens_on TEXT;
ALTER TABLE memories ADD COLUMN valid_from TEXT;
UPDATE memories SET valid_from = created_at;
ALTER TABLE memories ALTER COLUMN valid_from SET NOT NULL;
ALTER TABLE memories ADD COLUMN valid_to TEXT;
ALTER TABLE memories ADD COLUMN superseded_by BIGINT;
ALTER TABLE memories ADD COLUMN consolidated_into BIGINT;
INSERT INTO memories (user_id, kind, text, importance, item_key, source_turn_id, happens_on,
                      valid_from, created_at)
    SELECT user_id, 'event', text, 0.5, 'timeline:' || id, source_turn_id, happens_on,
           created_at, created_at
    FROM timeline;
DROP TABLE timeline;
DROP INDEX memories_by_user;
CREATE INDEX memories_current ON memories(user_id, valid_to, id);
CREATE INDEX memories_events ON memories(user_id, kind, happens_on);
ALTER TABLE memories ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED;
CREATE INDEX memories_tsv ON memories USING GIN (tsv);

CREATE TABLE memory_vectors (
    memory_id  BIGINT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    model      TEXT NOT NULL,
    vec        BYTEA NOT NULL
);

ALTER TABLE profiles ADD COLUMN statements TEXT NOT NULL DEFAULT '[]';
ALTER TABLE events ADD COLUMN result TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN event_id BIGINT REFERENCES events(id);
CREATE INDEX events_pending ON events(status, type, id);
