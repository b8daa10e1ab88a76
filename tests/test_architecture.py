"""The package's import structure, read from the modules' source (no import is executed).

``memory/`` must not depend on ``nodes/``, directly or through another module: a background
job gets its own context (``memory/job_context.py``), and ``nodes/`` imports ``memory/``
(issue 9, "Shape"). Imports under ``TYPE_CHECKING`` and inside functions count too: a reader
who follows them ends up in the other package all the same.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import novaberg

PACKAGE = Path(novaberg.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_modules(name: str) -> Iterator[str]:
    """The project modules ``name`` imports, as the interpreter would resolve them."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from novaberg import otel`` imports the module ``novaberg.otel``
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target in MODULES:
                yield target


def import_path(start: str, forbidden: str) -> list[str] | None:
    """A chain of imports from ``start`` into the package ``forbidden``, or ``None``."""
    seen = {start}
    paths = [[start]]
    while paths:
        path = paths.pop()
        for target in imported_modules(path[-1]):
            if target == forbidden or target.startswith(forbidden + "."):
                return [*path, target]
            if target not in seen:
                seen.add(target)
                paths.append([*path, target])
    return None


def test_the_walk_finds_known_imports() -> None:
    """The walk itself works: ``graph/build.py`` imports ``nodes/context.py`` for its types
    only, and ``otel`` as ``from novaberg import otel``."""
    assert import_path("novaberg.graph.build", "novaberg.nodes") == [
        "novaberg.graph.build",
        "novaberg.nodes.context",
    ]
    assert "novaberg.otel" in set(imported_modules("novaberg.graph.build"))


def test_memory_does_not_import_nodes() -> None:
    memory = sorted(m for m in MODULES if m.startswith("novaberg.memory"))
    assert memory, "no memory modules found"
    chains = {m: chain for m in memory if (chain := import_path(m, "novaberg.nodes"))}
    assert not chains, "memory/ depends on nodes/: " + "; ".join(
        " -> ".join(chain) for chain in chains.values()
    )


SQL_START = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WITH ", "CREATE ", "ALTER ", "DROP ")
DATABASE_CALLS = {"query", "execute", "scalar", "one", "transaction", "executemany"}
"""The ``Database``/``Connection`` methods that take SQL or open a transaction."""
ADMISSION = {"run_turn", "drain_self_triggers", "claim_waiting", "mark_delivered", "start_turn"}
"""What admitting and running a turn uses: the engine's turn service's alone
(``novaberg.engine.service``), never a route's."""
SERVER = sorted(m for m in MODULES if m.startswith("novaberg.server"))


def sql_and_admission(name: str) -> list[str]:
    """Where module ``name`` writes SQL, reaches the database's SQL methods, or admits or runs
    a turn itself."""
    found = []
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.lstrip().upper().startswith(SQL_START):
                found.append(f"line {node.lineno}: SQL {node.value[:40]!r}")
        elif isinstance(node, ast.Attribute) and node.attr in DATABASE_CALLS | ADMISSION:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_the_layer_scan_finds_sql_and_admission() -> None:
    """The scan itself works: the storage layer is full of both kinds of thing it looks for."""
    assert any("SQL" in f for f in sql_and_admission("novaberg.storage.db"))
    assert any(".run_turn" in f for f in sql_and_admission("novaberg.engine.service"))


def test_the_server_holds_no_sql_and_admits_no_turn_itself() -> None:
    """``server/`` encodes HTTP: SQL lives in ``storage/`` and ``engine/``, and a turn is
    admitted (queue, conversation claim, run, follow-ups) by the engine's one door."""
    assert SERVER, "no server modules found"
    found = {m: f for m in SERVER if (f := sql_and_admission(m))}
    assert not found, "; ".join(f"{m}: {', '.join(f)}" for m, f in found.items())
