-- m009_vectors (PostgreSQL): see sqlite/m009_vectors.sql. The pgvector column (emb) and its
-- HNSW indexes are added by the code when `CREATE EXTENSION vector` works
-- (novaberg.memory.vectors), never here: a server without pgvector must still migrate.
CREATE TABLE vector_spaces (
    id          BIGSERIAL PRIMARY KEY,
    embedder    TEXT NOT NULL UNIQUE,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    indexed     INTEGER NOT NULL DEFAULT 0,   -- 1: its HNSW index exists
    created_at  TEXT NOT NULL
);
INSERT INTO vector_spaces (embedder, dim, created_at)
    SELECT model, MAX(octet_length(vec)) / 4,
           to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    FROM memory_vectors GROUP BY model;
ALTER TABLE memory_vectors RENAME COLUMN model TO embedder;
ALTER TABLE memory_vectors ADD COLUMN user_id TEXT;
UPDATE memory_vectors v SET user_id = m.user_id FROM memories m WHERE m.id = v.memory_id;
DELETE FROM memory_vectors v USING vector_spaces s
    WHERE s.embedder = v.embedder AND octet_length(v.vec) <> s.dim * 4;
ALTER TABLE memory_vectors ALTER COLUMN user_id SET NOT NULL;
ALTER TABLE memory_vectors DROP CONSTRAINT memory_vectors_pkey;
ALTER TABLE memory_vectors ADD PRIMARY KEY (memory_id, embedder);
CREATE INDEX memory_vectors_space ON memory_vectors(embedder, user_id, memory_id);
