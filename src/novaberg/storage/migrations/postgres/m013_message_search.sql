-- m013_message_search (PostgreSQL): see sqlite/m013_message_search.sql; the words of every
-- message as a generated tsvector with a GIN index ('simple', as for memories).
ALTER TABLE messages ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED;
CREATE INDEX messages_tsv ON messages USING GIN (tsv);
CREATE INDEX conversations_by_user ON conversations(user_id, id);
