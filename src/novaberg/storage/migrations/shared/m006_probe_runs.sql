-- m006_probe_runs: each `novaberg probe` run (server, model, trials per experiment, the report
-- as `--json` prints it), and its requests in llm_calls, linked by probe_run_id (no turn).
CREATE TABLE probe_runs (
    id           {{id}},
    backend      TEXT NOT NULL,
    model        TEXT NOT NULL,
    trials       INTEGER NOT NULL,
    report_json  TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    finished_at  TEXT NOT NULL
);
CREATE INDEX probe_runs_by_model ON probe_runs(backend, model, id);
ALTER TABLE llm_calls ADD COLUMN probe_run_id {{ref}} REFERENCES probe_runs(id);
CREATE INDEX llm_calls_by_probe_run ON llm_calls(probe_run_id);
