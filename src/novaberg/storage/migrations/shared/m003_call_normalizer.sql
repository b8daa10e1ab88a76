-- m003_call_normalizer: which thinking normaliser read each call (noop, think_split, or none).
ALTER TABLE llm_calls ADD COLUMN normalizer TEXT NOT NULL DEFAULT '';
