"""What a probe run found: one result per experiment, verdicts per fault, the whole report.

``ProbeReport.contract_view()`` is exactly what ``novaberg probe --json`` prints
(../shared/DESIGN.md, "Probe and stats contract"): ``{"backend", "model", "experiments":
[{"name", "trials", "counts", "skipped", ...}]}``. An experiment that could not be measured is
``skipped`` with its ``reason`` and empty ``counts``: never zeros that would read as "passed".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """One fault, how often it was seen, and what Novaberg does about it."""

    fault: str
    seen: int
    of: int
    text: str

    def view(self) -> dict[str, Any]:
        return {"fault": self.fault, "seen": self.seen, "of": self.of, "text": self.text}


def verdict(fault: str, seen: int, of: int, defence: str, clean: str = "") -> Verdict:
    """``seen in 7 of 20: <defence>``, or ``not seen in 20 trials`` (with ``clean`` after it)."""
    if seen:
        return Verdict(fault, seen, of, f"seen in {seen} of {of}: {defence}")
    text = f"not seen in {of} trials" + (f": {clean}" if clean else "")
    return Verdict(fault, seen, of, text)


@dataclass
class ExperimentResult:
    """One experiment: ``trials`` run per condition, what was counted, or why it was skipped.

    ``errors``: requests that got no answer (a timeout, an HTTP error), counted in no count.
    ``detail``: the experiment's own figures (per condition, lengths, contexts)."""

    name: str
    trials: int
    counts: dict[str, int]
    skipped: bool = False
    reason: str = ""
    errors: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)

    @classmethod
    def skip(cls, name: str, reason: str, errors: int = 0) -> ExperimentResult:
        return cls(name=name, trials=0, counts={}, skipped=True, reason=reason, errors=errors)

    def contract_view(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trials": self.trials,
            "counts": dict(self.counts),
            "skipped": self.skipped,
            "reason": self.reason,
            "errors": self.errors,
            "detail": self.detail,
            "verdicts": [v.view() for v in self.verdicts],
        }


@dataclass
class ProbeReport:
    """A whole run against one backend and model."""

    backend: str
    model: str
    experiments: list[ExperimentResult]
    capabilities: tuple[str, ...] | None = None
    """As the server reports them (``/api/show``); ``None`` when its protocol does not."""
    requests: int = 0
    answered: int = 0
    wall_s: float = 0.0
    run_id: int | None = None
    notices: list[str] = field(default_factory=list)

    def contract_view(self) -> dict[str, Any]:
        """Exactly the ``--json`` object of the contract (extra keys only per experiment)."""
        return {
            "backend": self.backend,
            "model": self.model,
            "experiments": [e.contract_view() for e in self.experiments],
        }
