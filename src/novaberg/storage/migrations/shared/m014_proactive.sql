-- m014_proactive: Nova writes first (novaberg.proactive). A proactive message is an event of
-- type 'proactive' in the same queue as self-triggers and memory jobs, claimable only once
-- due_at (UTC, the format of now()) has passed; cause_key makes scheduling idempotent per cause
-- (the turn that asked for a reminder, the command that set it). Its status is one of pending,
-- running (claimed), sent, dropped (its reason in result) and cancelled. Per-user switches:
-- proactive_switches, one row per kind ('*' for all) that the user turned on or off.
ALTER TABLE events ADD COLUMN due_at TEXT;
ALTER TABLE events ADD COLUMN cause_key TEXT;
CREATE UNIQUE INDEX events_by_cause ON events(cause_key) WHERE cause_key IS NOT NULL;
CREATE INDEX events_due ON events(type, status, due_at) WHERE due_at IS NOT NULL;
CREATE TABLE proactive_switches (
    user_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    enabled     INTEGER NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (user_id, kind)
);
