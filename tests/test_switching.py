"""Short turns at the interpreter's lock while long pure-Python warm-up work runs."""

from __future__ import annotations

import sys
import threading
from datetime import datetime
from typing import Any

import pytest

from novaberg.engine import background
from novaberg.switching import SHORT_S, short_turns


def test_short_turns_shortens_the_switch_interval_and_restores_it() -> None:
    before = sys.getswitchinterval()
    with short_turns():
        assert sys.getswitchinterval() == pytest.approx(SHORT_S)
    assert sys.getswitchinterval() == before


def test_overlapping_short_turns_restore_the_interval_the_first_found() -> None:
    """Two engines warming up at once: whichever ends first must not restore the short
    interval for good, nor end the other's short turns early."""
    before = sys.getswitchinterval()
    first, second = short_turns(), short_turns()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start ends first
    assert sys.getswitchinterval() == pytest.approx(SHORT_S)
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == before


def test_short_turns_restore_the_interval_when_the_work_fails() -> None:
    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError), short_turns():
        raise RuntimeError("the warm-up broke")
    assert sys.getswitchinterval() == before


def test_dateparsers_warm_up_runs_with_short_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its 300 ms of pattern compiling, beside a fresh process's first turn, held the loop
    and the database workers up to 5 ms at every hand-over (issue 21)."""
    import novaberg.memory.jobs as jobs

    seen: list[float] = []

    def recording(text: str, at: datetime, language: str) -> list[Any]:
        seen.append(sys.getswitchinterval())
        return []

    monkeypatch.setattr(jobs, "date_expressions", recording)
    monkeypatch.setattr(jobs, "resolve_date", lambda *a: None)
    before = sys.getswitchinterval()
    worker = threading.Thread(target=background.warm_dateparser)
    worker.start()
    worker.join()
    assert seen and all(s == pytest.approx(SHORT_S) for s in seen)
    assert sys.getswitchinterval() == before
