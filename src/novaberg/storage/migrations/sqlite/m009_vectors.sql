-- m009_vectors: one vector per memory item per embedder. Each embedder's name and vector
-- length are recorded once (vector_spaces); a vector of another length is refused, and two
-- embedders' vectors are never compared. memory_vectors (float32 blobs) is the truth; the
-- sqlite-vec index of each space (a vec0 table memory_vec_<id> with its triggers) is made by
-- the code when the extension loads (novaberg.memory.vectors), never here: a Python without
-- loadable extensions must still open this database.
CREATE TABLE vector_spaces (
    id          INTEGER PRIMARY KEY,
    embedder    TEXT NOT NULL UNIQUE,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    indexed     INTEGER NOT NULL DEFAULT 0,   -- 1: memory_vec_<id> mirrors memory_vectors
    created_at  TEXT NOT NULL
);
INSERT INTO vector_spaces (embedder, dim, created_at)
    SELECT model, MAX(length(vec)) / 4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM memory_vectors GROUP BY model;
CREATE TABLE memory_vectors_v2 (
    memory_id  INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    embedder   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    vec        BLOB NOT NULL,                 -- float32, little-endian
    PRIMARY KEY (memory_id, embedder)
);
INSERT INTO memory_vectors_v2 (memory_id, embedder, user_id, vec)
    SELECT v.memory_id, v.model, m.user_id, v.vec
    FROM memory_vectors v JOIN memories m ON m.id = v.memory_id
    JOIN vector_spaces s ON s.embedder = v.model AND s.dim * 4 = length(v.vec);
DROP TABLE memory_vectors;
ALTER TABLE memory_vectors_v2 RENAME TO memory_vectors;
CREATE INDEX memory_vectors_space ON memory_vectors(embedder, user_id, memory_id);
