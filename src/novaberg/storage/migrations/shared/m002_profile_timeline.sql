-- m002_profile_timeline: the user profile (core + adaptive, versioned) and timeline entries.
CREATE TABLE profiles (
    id          {{id}},
    user_id     TEXT NOT NULL,
    part        TEXT NOT NULL CHECK (part IN ('core', 'adaptive')),
    version     INTEGER NOT NULL,
    text        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    UNIQUE (user_id, part, version)
);

CREATE TABLE timeline (
    id              {{id}},
    user_id         TEXT NOT NULL,
    happens_on      TEXT NOT NULL,          -- ISO date
    text            TEXT NOT NULL,
    source_turn_id  {{ref}} REFERENCES turns(id),
    created_at      TEXT NOT NULL
);
CREATE INDEX timeline_by_user_date ON timeline(user_id, happens_on);
