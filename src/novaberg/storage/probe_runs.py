"""The ``probe_runs`` table: one row per ``novaberg probe`` run, its requests in ``llm_calls``
(linked by ``probe_run_id``, no turn)."""

from __future__ import annotations

from novaberg.storage.db import Database, insert_calls
from novaberg.telemetry import CallRecord


def save(
    db: Database,
    *,
    backend: str,
    model: str,
    trials: int,
    report_json: str,
    calls: list[CallRecord],
    started_at: str,
    finished_at: str,
) -> int:
    """Store a run and its calls in one transaction; return the run's id."""
    with db.transaction() as c:
        run_id = c.execute(
            "INSERT INTO probe_runs (backend, model, trials, report_json, started_at, "
            "finished_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (backend, model, trials, report_json, started_at, finished_at),
        ).scalar()
        insert_calls(c, calls, turn_id=None, probe_run_id=run_id)
    return int(run_id)
