-- m010_runner_host: which process runs a turn (host:pid), so that a turn a dead process left
-- 'running' is marked aborted by the next process on that host (novaberg.worker); and which
-- server of a backend answered a call (one of ollama_hosts; NULL when not known).
ALTER TABLE turns ADD COLUMN runner TEXT;
CREATE INDEX turns_running ON turns(status) WHERE status = 'running';
ALTER TABLE llm_calls ADD COLUMN host TEXT;
