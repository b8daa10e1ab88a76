"""``novaberg probe``: measure a model server's quirks before trusting it.

One module per experiment (``think_split``, ``tools`` for ``dropped_tool_call``, ``structured``
for ``structured_output``, ``truncation``, ``think_flag``, ``latency``), each sending its
requests through the backend object (``target.py``: caller ``probe_<name>``, one call record
per request, the backend's concurrency as the bound) and counting what the project's own
guard and normaliser make of the answers. ``runner.py`` runs them all at once and stores the
run (``store.py``); ``result.py`` holds the report and the ``--json`` contract.
"""

from novaberg.probe.result import ExperimentResult, ProbeReport, Verdict
from novaberg.probe.runner import DEFAULT_TRIALS, EXPERIMENTS, run_probe

__all__ = [
    "DEFAULT_TRIALS",
    "EXPERIMENTS",
    "ExperimentResult",
    "ProbeReport",
    "Verdict",
    "run_probe",
]
