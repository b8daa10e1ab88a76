-- m015_call_timing: what a call record kept only in memory until now, so that a stored turn
-- (GET /api/turns/{id}) reads as the live one did: the server's own account of the call
-- (backend_ms, Ollama's total_duration; 0 when unknown) and how it asked for JSON (json_mode:
-- json_schema, json_object, prompt, or '' for none). Rows written before read 0 and ''.
ALTER TABLE llm_calls ADD COLUMN backend_ms {{real}} NOT NULL DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN json_mode TEXT NOT NULL DEFAULT '';
