-- m001_initial: conversations, messages, turns, every LLM call, events, memories.
CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    user_id     TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE turns (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES conversations(id),
    origin           TEXT NOT NULL DEFAULT 'user',      -- user | self_trigger | …
    user_text        TEXT NOT NULL,                      -- kept even when the turn fails
    status           TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'aborted')),
    error            TEXT,
    trace_json       TEXT,
    started_at       TEXT NOT NULL,
    finished_at      TEXT
);
CREATE INDEX turns_by_conversation ON turns(conversation_id, id);

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES conversations(id),
    turn_id          INTEGER NOT NULL REFERENCES turns(id),
    role             TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content          TEXT NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);

CREATE TABLE llm_calls (
    id                 INTEGER PRIMARY KEY,
    turn_id            INTEGER REFERENCES turns(id),
    seq                INTEGER NOT NULL,
    caller             TEXT NOT NULL,
    backend            TEXT NOT NULL,
    model              TEXT NOT NULL,
    think              INTEGER NOT NULL,
    content_len        INTEGER NOT NULL,
    thinking_len       INTEGER NOT NULL,
    eval_count         INTEGER NOT NULL,
    prompt_eval_count  INTEGER NOT NULL,
    tool_calls         INTEGER NOT NULL,
    outcome            TEXT NOT NULL,
    duration_ms        REAL NOT NULL,
    queue_wait_ms      REAL NOT NULL,
    attempt            INTEGER NOT NULL,
    error              TEXT NOT NULL DEFAULT '',
    created_at         TEXT NOT NULL
);
CREATE INDEX llm_calls_by_turn ON llm_calls(turn_id, seq);

CREATE TABLE events (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES conversations(id),
    turn_id          INTEGER REFERENCES turns(id),
    type             TEXT NOT NULL,
    status           TEXT NOT NULL,
    payload          TEXT NOT NULL DEFAULT '{}',
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX events_by_status ON events(status, id);

CREATE TABLE memories (
    id              INTEGER PRIMARY KEY,
    user_id         TEXT NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'short_term',
    text            TEXT NOT NULL,
    score           REAL NOT NULL,
    source_turn_id  INTEGER NOT NULL REFERENCES turns(id),
    created_at      TEXT NOT NULL,
    UNIQUE (source_turn_id, kind)
);
CREATE INDEX memories_by_user ON memories(user_id, id);
