-- m011_vector_counts: per embedder and user, how many vectors were added to memory_vectors
-- and removed from it, kept by triggers, so that a process holding a user's vectors in
-- memory (novaberg.memory.vectors) knows when its copy is stale. Releases before this one
-- made the table and its triggers in code: made again here, counted afresh.
DROP TRIGGER IF EXISTS vector_counts_insert;
DROP TRIGGER IF EXISTS vector_counts_delete;
DROP TRIGGER IF EXISTS vector_counts_update;
CREATE TABLE IF NOT EXISTS vector_counts (
    embedder TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    added    INTEGER NOT NULL DEFAULT 0,
    removed  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (embedder, user_id)
);
DELETE FROM vector_counts;
INSERT INTO vector_counts (embedder, user_id, added)
    SELECT embedder, user_id, COUNT(*) FROM memory_vectors GROUP BY embedder, user_id;
CREATE TRIGGER vector_counts_insert AFTER INSERT ON memory_vectors
BEGIN
    INSERT INTO vector_counts (embedder, user_id, added) VALUES (new.embedder, new.user_id, 1)
    ON CONFLICT (embedder, user_id) DO UPDATE SET added = added + 1;
END;
CREATE TRIGGER vector_counts_delete AFTER DELETE ON memory_vectors
BEGIN
    UPDATE vector_counts SET removed = removed + 1
    WHERE embedder = old.embedder AND user_id = old.user_id;
END;
CREATE TRIGGER vector_counts_update AFTER UPDATE ON memory_vectors
BEGIN
    UPDATE vector_counts SET removed = removed + 1
    WHERE embedder = old.embedder AND user_id = old.user_id;
    INSERT INTO vector_counts (embedder, user_id, added) VALUES (new.embedder, new.user_id, 1)
    ON CONFLICT (embedder, user_id) DO UPDATE SET added = added + 1;
END;
