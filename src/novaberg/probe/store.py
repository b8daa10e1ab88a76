"""Each probe run in the database: one ``probe_runs`` row with the report as ``--json`` prints
it, and one ``llm_calls`` row per request sent (linked by ``probe_run_id``, no turn); the
statements are in :mod:`novaberg.storage.probe_runs`."""

from __future__ import annotations

import json

from novaberg.probe.result import ProbeReport
from novaberg.storage import probe_runs
from novaberg.storage.db import Database
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
    return probe_runs.save(
        db,
        backend=report.backend,
        model=report.model,
        trials=trials,
        report_json=json.dumps(report.contract_view(), ensure_ascii=False),
        calls=sorted(calls, key=lambda r: r.started),
        started_at=started_at,
        finished_at=finished_at,
    )
