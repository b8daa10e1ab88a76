-- m008_user_events: the per-user event log GET /api/events streams (ids and kinds only, never
-- text: the text is read from messages/events when it is sent, so forget needs no entry here),
-- and which self-triggered follow-ups a response has delivered (never lost, never twice).
CREATE TABLE user_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,   -- never reused: clients resume after it
    user_id     TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('followup', 'job')),
    ref_id      INTEGER NOT NULL,                    -- followup: its turn; job: events.id
    created_at  TEXT NOT NULL
);
CREATE INDEX user_events_by_user ON user_events(user_id, id);

CREATE TABLE followup_deliveries (
    turn_id       INTEGER PRIMARY KEY REFERENCES turns(id),  -- the follow-up's turn
    channel       TEXT NOT NULL,                             -- openai | api | inline | before
    delivered_at  TEXT NOT NULL
);
-- Follow-ups stored before this migration were shown where their turn ran.
INSERT INTO followup_deliveries (turn_id, channel, delivered_at)
    SELECT id, 'before', COALESCE(finished_at, started_at) FROM turns
    WHERE origin = 'self_trigger' AND status = 'done';
