"""The package's import structure, read from the modules' source (no import is executed).

``memory/`` must not depend on ``nodes/``, directly or through another module: a background
job gets its own context (``memory/job_context.py``), and ``nodes/`` imports ``memory/``
(issue 9, "Shape"). No module imports itself back through others: the package's import graph
has no cycle (issue 24), so a shared piece lives in the module it belongs to, not behind an
import that waits until a function runs. Imports under ``TYPE_CHECKING`` and inside functions
count too, for both rules: a reader who follows them ends up in the other package, or back
where they started, all the same.

An import is read as the interpreter resolves it: ``from novaberg.probe import latency`` imports
the module ``novaberg.probe.latency`` (and ``novaberg.probe``'s ``__init__`` only as the package
every one of its modules is imported through, which is no edge from inside the package), while
``from novaberg.probe import run_probe`` imports the package's ``__init__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import novaberg
from novaberg.backends.base import Backend

PACKAGE = Path(novaberg.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_modules(name: str) -> Iterator[str]:
    """The project modules ``name`` imports, as the interpreter would resolve them: each
    imported module, then the packages it is imported through except those ``name`` itself
    lies in (they are being imported already when ``name`` runs)."""
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
            # ``from novaberg import otel`` imports the module ``novaberg.otel``; a name that
            # is no module is read from ``base`` itself
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            targets = [m for m in submodules if m in MODULES]
            if len(targets) < len(submodules):
                targets.append(base)
        else:
            continue
        for target in targets:
            if target in MODULES:
                yield target
            for through in packages_of(target):
                if through != name and not name.startswith(through + "."):
                    yield through


def packages_of(module: str) -> Iterator[str]:
    """The project packages the interpreter imports before ``module``, outermost first."""
    parts = module.split(".")
    for end in range(1, len(parts)):
        if (package := ".".join(parts[:end])) in MODULES:
            yield package


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


def test_the_walk_reads_a_submodule_import_as_the_submodule() -> None:
    """``probe/runner.py`` imports its sibling experiments by the package's name: that is
    the modules, not the package's ``__init__`` (which imports ``runner``); and a module
    outside a package imports that package's ``__init__`` on the way to its module."""
    runner = set(imported_modules("novaberg.probe.runner"))
    assert "novaberg.probe.latency" in runner
    assert "novaberg.probe" not in runner
    assert "novaberg.backends" in set(imported_modules("novaberg.queue"))


def test_memory_does_not_import_nodes() -> None:
    memory = sorted(m for m in MODULES if m.startswith("novaberg.memory"))
    assert memory, "no memory modules found"
    chains = {m: chain for m in memory if (chain := import_path(m, "novaberg.nodes"))}
    assert not chains, "memory/ depends on nodes/: " + "; ".join(
        " -> ".join(chain) for chain in chains.values()
    )


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of ``graph`` closes (at least one through every module
    that lies on a cycle), each as the chain of imports from a module back to itself."""
    found: list[list[str]] = []
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> None:
        path.append(module)
        for target in graph[module]:
            if target in path:
                found.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)
    return found


def test_the_cycle_walk_finds_a_cycle() -> None:
    graph = {"a": ["b"], "b": ["c", "d"], "c": ["a"], "d": []}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": ["b"], "b": []}) == []


def test_no_module_imports_itself_back() -> None:
    """The package's import graph has no cycle: ``context`` does not import what imports it
    (``prompts/budget``), nor ``prompts/neutral`` the builders that use it (issue 24)."""
    graph = {m: sorted(set(imported_modules(m)) - {m}) for m in MODULES}
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


OPTIONAL_BACKEND_PARTS = {
    name
    for name in vars(Backend)
    if not name.startswith("_") and name not in Backend.__abstractmethods__
}
"""The parts of a backend that the contract declares with a default (``embed``,
``capabilities``, …): every backend has them, so none is looked up by name."""


def parts_looked_up(name: str) -> list[str]:
    """Where module ``name`` finds an optional part of a backend with ``getattr``/``hasattr``."""
    found = []
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in OPTIONAL_BACKEND_PARTS
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_optional_backend_part_is_looked_up_by_name() -> None:
    """``Backend`` declares its optional parts with defaults (issue 24): callers use them
    plainly, where the type checker sees them."""
    assert {"embed", "capabilities", "json_mode", "sent_think", "context_claims"} <= (
        OPTIONAL_BACKEND_PARTS
    )
    found = {m: f for m in MODULES if (f := parts_looked_up(m))}
    assert not found, "; ".join(f"{m}: {', '.join(f)}" for m, f in found.items())


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


LAYERS: dict[str, int] = {
    # 0: what every layer may use: errors, settings, text helpers, the trace's records
    "novaberg": 0,
    "errors": 0,
    "redaction": 0,
    "text": 0,
    "config": 0,
    "validation": 0,
    "telemetry": 0,
    "switching": 0,
    "trace_document": 0,
    # 1: the database, and the throwaway servers the tests start
    "storage": 1,
    "testing": 1,
    # 2: reaching a model: the backends, the model queue, prompts, what every model caller gets
    "backends": 2,
    "embedders": 2,
    "queue": 2,
    "otel": 2,
    "context": 2,
    "prompts": 2,
    "structured": 2,
    "thinking": 2,
    "echo": 2,
    # 3: what turns and jobs are made of
    "memory": 3,
    "tools": 3,
    "nodes": 3,
    "graph": 3,
    "jobs": 3,
    "proactive": 3,
    "stats": 3,
    "speech": 3,
    "probe": 3,
    # 4: the turn engine and its one door into a turn
    "engine": 4,
    "evals": 4,
    # 5: the doors that call the engine
    "server": 5,
    "mcp": 5,
    "cli": 5,
    "__main__": 5,
}
"""The package's layers, lowest first (README, "Developing"): a module imports its own layer or
those below it, never one above (issue 24). Keys are the top-level packages and modules."""

DRIVERS = {"novaberg.jobs.worker": 5, "novaberg.proactive.sender": 5}
"""Modules that live beside their domain but call the engine as a door does: the sweeper every
``serve`` and ``worker`` process runs, and the sender of proactive messages (a turn of Nova's
own). Nothing below the doors imports them."""


def layer_of(module: str) -> int:
    if module in DRIVERS:
        return DRIVERS[module]
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else parts[0]]


def upward_imports(graph: dict[str, list[str]]) -> list[str]:
    """Each import in ``graph`` (module -> the modules it imports) that goes up a layer."""
    return [
        f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
        for m in sorted(graph)
        for t in graph[m]
        if layer_of(t) > layer_of(m)
    ]


def test_every_module_has_a_layer() -> None:
    """A new top-level package or module is placed in the layer map before it lands."""
    tops = {m.split(".")[1] if "." in m else m for m in MODULES}
    assert not tops - set(LAYERS), f"not in the layer map: {sorted(tops - set(LAYERS))}"


def test_the_layer_check_finds_an_upward_import() -> None:
    """The check itself works: a storage module or a job that imported the engine would be
    named; the sweeper, a driver, may."""
    graph = {
        "novaberg.storage.db": ["novaberg.engine.core"],
        "novaberg.jobs.events": ["novaberg.engine.service", "novaberg.storage.db"],
        "novaberg.jobs.worker": ["novaberg.engine.service"],
    }
    assert upward_imports(graph) == [
        "novaberg.jobs.events (layer 3) imports novaberg.engine.service (layer 4)",
        "novaberg.storage.db (layer 1) imports novaberg.engine.core (layer 4)",
    ]


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = upward_imports({m: sorted(set(imported_modules(m))) for m in MODULES})
    assert not found, "; ".join(found)


def sql_in(name: str) -> list[str]:
    """Where module ``name`` holds SQL: a string that starts as a statement does (the SQL here
    is written in capitals), or a database call given a statement's text."""
    found = []
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.lstrip().startswith(SQL_START):
                found.append(f"line {node.lineno}: {node.value.lstrip()[:30]!r}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in DATABASE_CALLS - {"transaction"}
            and node.args
            and isinstance(node.args[0], ast.JoinedStr)
        ):
            found.append(f"line {node.lineno}: .{node.func.attr}(f'...')")
    return found


def test_the_sql_scan_finds_statements_and_not_prose() -> None:
    assert sql_in("novaberg.storage.turns")
    assert not sql_in("novaberg.probe.structured")  # prose that begins "With the schema"


def test_sql_lives_in_storage_alone() -> None:
    """Every statement is a repository's, under ``storage/`` (``testing/``, beside it in
    layer 1, starts the tests' databases): a module above it asks a repository."""
    outside = {m for m in MODULES if not m.startswith(("novaberg.storage", "novaberg.testing"))}
    holding = {m: found for m in sorted(outside) if (found := sql_in(m))}
    assert not holding, f"SQL outside storage/: {holding}"


def past_the_engine(module: str) -> set[str]:
    """The packages below the engine that a door module imports directly (the base layer, the
    engine, its own package and the other doors it composes are not counted)."""
    own = module.split(".")[1]
    targets = set(imported_modules(module))
    named = {t for t in targets if not any(o.startswith(t + ".") for o in targets)}
    return {
        t.split(".")[1]
        for t in named  # a package counts only when it is imported itself
        if "." in t
        and t.split(".")[1] not in {own, "engine"}
        and t not in DRIVERS
        and 0 < layer_of(t) < 4
    }


def test_the_engine_check_counts_what_lies_below_the_engine() -> None:
    assert past_the_engine("novaberg.engine.voice") == {"speech"}  # as the engine may
    assert past_the_engine("novaberg.engine.memories") >= {"memory", "storage"}
    assert "engine" not in past_the_engine("novaberg.server.api_turns")
    assert not past_the_engine("novaberg.server.errors")


DOORS = sorted(m for m in MODULES if m.startswith(("novaberg.server", "novaberg.mcp")))
"""The modules of the two network doors: the HTTP server and the MCP server."""


def test_the_doors_speak_to_the_engine_and_to_nothing_below_it() -> None:
    """A route or an MCP tool speaks its protocol to the engine's doors (``engine/``: the turn
    service, conversations, memories, keys, the event log, voice, the pages) and the engine to
    memory, storage and the rest (issue 24)."""
    assert len(DOORS) > len(SERVER), "no MCP modules found"
    found = {m: sorted(p) for m in DOORS if (p := past_the_engine(m))}
    assert not found, f"a door reaches below the engine: {found}"


def database_reaches(name: str) -> list[str]:
    """Where module ``name`` reads an object's ``db`` attribute (the engine's database)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "db"
    ]


def test_the_database_reach_scan_finds_one() -> None:
    assert database_reaches("novaberg.engine.conversation_service")  # the door itself holds it


def test_no_door_holds_the_database() -> None:
    """The doors pass no database handle around either (an attribute, not an import, which the
    import check cannot see): what they need from it is an engine door's method."""
    found = {m: f for m in DOORS if (f := database_reaches(m))}
    assert not found, f"a door reaches the database: {found}"


TYPED_CROSSINGS = (
    "novaberg.graph.channels",  # a turn's state, node to node
    "novaberg.trace_document",  # what it stores of it, read back by the Why panel and stats
    "novaberg.engine.contract",  # the --json object of a live and of a stored turn
    "novaberg.engine.why",  # the Why panel's details
    "novaberg.storage.events",  # an event and its payload, from the turn to the jobs
    "novaberg.memory.transfer",  # the export file
)
"""The modules whose objects carry a turn's data across the layers (issue 24)."""


def untyped_in(name: str) -> list[str]:
    """Where a public function or a public class's field of module ``name`` says ``Any``."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            every = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            hints = [a.annotation for a in every if a.annotation is not None]
            hints += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            hints = [s.annotation for s in node.body if isinstance(s, ast.AnnAssign)]
        else:
            continue
        found += [
            f"line {h.lineno}: {node.name}: {ast.unparse(h)}"
            for h in hints
            if any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(h))
        ]
    return found


def test_the_untyped_scan_finds_one() -> None:
    assert untyped_in("novaberg.engine.result")  # contract_json: the JSON itself, for a door


def test_a_turns_data_crosses_the_layers_typed() -> None:
    """What a model can say it holds is a model there, not ``dict[str, Any]``."""
    found = {m: f for m in TYPED_CROSSINGS if (f := untyped_in(m))}
    assert not found, f"untyped where a turn's data crosses layers: {found}"
