-- m010_runner_host: which process runs a turn (host:pid), so that a turn a dead process left
-- 'running' is marked aborted by the next process on that host (novaberg.worker).
ALTER TABLE turns ADD COLUMN runner TEXT;
