-- m011_vector_counts: per embedder and user, how many vectors were added to memory_vectors
-- and removed from it, kept by a trigger, so that a process holding a user's vectors in
-- memory (novaberg.memory.vectors) knows when its copy is stale.
CREATE TABLE vector_counts (
    embedder TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    added    BIGINT NOT NULL DEFAULT 0,
    removed  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (embedder, user_id)
);
INSERT INTO vector_counts (embedder, user_id, added)
    SELECT embedder, user_id, COUNT(*) FROM memory_vectors GROUP BY embedder, user_id;
CREATE FUNCTION novaberg_vector_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE vector_counts SET removed = removed + 1
        WHERE embedder = OLD.embedder AND user_id = OLD.user_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO vector_counts (embedder, user_id, added)
        VALUES (NEW.embedder, NEW.user_id, 1)
        ON CONFLICT (embedder, user_id) DO UPDATE SET added = vector_counts.added + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER vector_counts AFTER INSERT OR UPDATE OR DELETE ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION novaberg_vector_counts();
