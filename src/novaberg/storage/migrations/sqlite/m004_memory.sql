-- m004_memory: one memory table for every kind (short-term, long-term, event), with
-- provenance, an idempotency key, validity (superseded facts keep a validity end), a
-- full-text index (FTS5, BM25), optional embeddings, profile statements with their
-- sources, and background-job results. The timeline table becomes kind 'event'.
CREATE TABLE memories_v2 (
    id                 INTEGER PRIMARY KEY,
    user_id            TEXT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('short_term', 'long_term', 'event')),
    text               TEXT NOT NULL,
    importance         REAL NOT NULL,
    item_key           TEXT NOT NULL,              -- idempotency: one row per source and item
    source_turn_id     INTEGER REFERENCES turns(id),
    source_message_id  INTEGER REFERENCES messages(id),
    derived_from       TEXT NOT NULL DEFAULT '[]', -- JSON list of memory ids (long-term facts)
    happens_on         TEXT,                       -- ISO date (events)
    valid_from         TEXT NOT NULL,
    valid_to           TEXT,                       -- set when superseded
    superseded_by      INTEGER,
    consolidated_into  INTEGER,                    -- a short-term item covered by a fact
    created_at         TEXT NOT NULL,
    UNIQUE (user_id, item_key)
);
INSERT INTO memories_v2 (id, user_id, kind, text, importance, item_key, source_turn_id,
                         valid_from, created_at)
    SELECT id, user_id, kind, text, score, 'turn:' || source_turn_id || ':' || kind,
           source_turn_id, created_at, created_at
    FROM memories;
INSERT INTO memories_v2 (user_id, kind, text, importance, item_key, source_turn_id, happens_on,
                         valid_from, created_at)
    SELECT user_id, 'event', text, 0.5, 'timeline:' || id, source_turn_id, happens_on,
           created_at, created_at
    FROM timeline;
DROP TABLE memories;
DROP TABLE timeline;
ALTER TABLE memories_v2 RENAME TO memories;
CREATE INDEX memories_current ON memories(user_id, valid_to, id);
CREATE INDEX memories_events ON memories(user_id, kind, happens_on);

-- Full-text index over the text, with the owner and the kind as filter columns (FTS5 can
-- then rank a user's facts alone, or walk their newest matches without ranking them all).
CREATE VIRTUAL TABLE memories_fts USING fts5(
    text, kind, user_id, content='memories', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text, kind, user_id)
        VALUES (new.id, new.text, new.kind, new.user_id);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text, kind, user_id)
        VALUES ('delete', old.id, old.text, old.kind, old.user_id);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, kind, user_id ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text, kind, user_id)
        VALUES ('delete', old.id, old.text, old.kind, old.user_id);
    INSERT INTO memories_fts(rowid, text, kind, user_id)
        VALUES (new.id, new.text, new.kind, new.user_id);
END;
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');

CREATE TABLE memory_vectors (
    memory_id  INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    model      TEXT NOT NULL,
    vec        BLOB NOT NULL                        -- float32, little-endian
);

ALTER TABLE profiles ADD COLUMN statements TEXT NOT NULL DEFAULT '[]';
ALTER TABLE events ADD COLUMN result TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN event_id INTEGER REFERENCES events(id);
CREATE INDEX events_pending ON events(status, type, id);
