-- m007_users: the server's users and their API keys (only a hash of each key is stored), and
-- the conversations a front-end names by its own chat id (Open WebUI's X-OpenWebUI-Chat-Id).
CREATE TABLE api_users (
    name         TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL UNIQUE,
    frontend     INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    revoked_at   TEXT
);
CREATE TABLE conversation_aliases (
    user_id          TEXT NOT NULL,
    external_id      TEXT NOT NULL,
    conversation_id  {{ref}} NOT NULL REFERENCES conversations(id),
    created_at       TEXT NOT NULL,
    PRIMARY KEY (user_id, external_id)
);
