"""Short turns at the interpreter's lock while a thread does long pure-Python work.

CPython lets a thread that runs Python keep the lock for the switch interval (5 ms) before
another thread that asked for it gets it. A warm-up thread that compiles patterns for 300 ms
(dateparser's first call) so delays every hand-over of the threads a turn runs on: the event
loop after each chunk of a model's answer, each query of a database worker. Beside a fresh
``novaberg ask``'s first turn this kept the responder's request 120 ms behind the router's
answer (issue 21). :func:`short_turns` shortens the interval while such work runs; the loop
and the workers then wait at most about that long for the lock, and the work itself takes
a little longer.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SHORT_S = 0.0002
"""The switch interval while long pure-Python work runs in a thread."""

_lock = threading.Lock()
_depth = 0
_before = 0.0


@contextmanager
def short_turns(interval_s: float = SHORT_S) -> Iterator[None]:
    """Run the block with the switch interval at most ``interval_s``; nested or concurrent
    uses (two engines warming up at once) restore the interval the first one found."""
    global _depth, _before
    with _lock:
        if _depth == 0:
            _before = sys.getswitchinterval()
        _depth += 1
        sys.setswitchinterval(min(interval_s, _before))
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                sys.setswitchinterval(_before)
