-- m012_frontend_tasks: the model calls of a front-end's own task (a chat title, a Continue:
-- novaberg.engine.tasks) belong to no turn, job or probe run; they name their user and the
-- task's kind, so that stats count them for that user.
ALTER TABLE llm_calls ADD COLUMN user_id TEXT;
ALTER TABLE llm_calls ADD COLUMN task TEXT;
CREATE INDEX llm_calls_by_user ON llm_calls(user_id) WHERE user_id IS NOT NULL;
