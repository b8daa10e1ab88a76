"""Each probe run in the database: one ``probe_runs`` row with the report as ``--json`` prints
it, and one ``llm_calls`` row per request sent (linked by ``probe_run_id``, no turn)."""

from __future__ import annotations

import json

from novaberg.probe.result import ProbeReport
from novaberg.storage.db import Database, insert_calls
from novaberg.telemetry import CallRecord


def save_run(
    db: Database,
    report: ProbeReport,
    calls: list[CallRecord],
    *,
    trials: int,
    started_at: str,
    finished_at: str,
) -> int:
    """Store the run and its calls in one transaction; return the run's id."""
    with db.transaction() as c:
        run_id = c.execute(
            "INSERT INTO probe_runs (backend, model, trials, report_json, started_at, "
            "finished_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (
                report.backend,
                report.model,
                trials,
                json.dumps(report.contract_view(), ensure_ascii=False),
                started_at,
                finished_at,
            ),
        ).scalar()
        insert_calls(c, sorted(calls, key=lambda r: r.started), turn_id=None, probe_run_id=run_id)
    return int(run_id)


def latest_run(db: Database) -> dict[str, object] | None:
    """The newest stored run (its row, with the report parsed)."""
    row = db.one("SELECT * FROM probe_runs ORDER BY id DESC LIMIT 1")
    if row is None:
        return None
    return {**row, "report": json.loads(row["report_json"])}
