"""The turn engine: one user message in, one checked reply out, everything recorded.

Independent of any user interface: the CLI (and later an HTTP server) call
:meth:`Engine.run_turn` with callbacks for streamed tokens and node progress.

Where things live: ``core.py`` the :class:`Engine` (open, run a turn, self-triggers),
``assembly.py`` the graph, ``embedded_policy.py`` what is off on the embedded model,
``turn_store.py`` what a finished turn stores, ``background.py`` the memory-job policy,
``result.py`` :class:`TurnResult` and the contract JSON.
"""

from novaberg.engine.assembly import compile_turn_graph
from novaberg.engine.core import Engine
from novaberg.engine.result import TurnResult
from novaberg.validation import validate_message

__all__ = ["Engine", "TurnResult", "compile_turn_graph", "validate_message"]
