"""``novaberg memory reindex``: compute the vectors memory search by meaning lacks.

Items stored while no embedder ran (or before this version), imported ones, and every item
after the model behind an embedder's name changed (its vectors then have another length and
are refused): each gets one vector of the current embedder (or ``--embedder NAME``), in
batches, with a progress bar. ``--rebuild`` drops that embedder's vectors first and computes
them all again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from novaberg.errors import EmbedderError, UsageError
from novaberg.storage import memory_texts
from novaberg.storage.db import Database
from novaberg.storage.vectors import VectorIndex, open_vector_index

BATCH = 64
Embed = Callable[[Sequence[str]], list[list[float]]]


@dataclass
class Reindexed:
    embedder: str
    dim: int | None
    computed: int = 0
    dropped: int = 0
    """Vectors of this embedder removed first (``--rebuild``, or their length changed)."""
    notices: list[str] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder,
            "dim": self.dim,
            "computed": self.computed,
            "dropped": self.dropped,
            "notices": self.notices,
        }


def reindex(
    db: Database,
    index: VectorIndex,
    embedder: str,
    embed: Embed,
    *,
    user: str | None = None,
    rebuild: bool = False,
    batch: int = BATCH,
    started: Callable[[int], None] = lambda total: None,
    advanced: Callable[[int], None] = lambda n: None,
    keep: Callable[[str], bool] | None = None,
) -> Reindexed:
    """Blocking (a command, or a database worker): give every item without a vector of
    ``embedder`` one, ``batch`` texts per call of ``embed``; ``started(total)`` once the work
    is known, ``advanced(n)`` after each batch is stored. ``keep``: which texts are this
    embedder's (``memory.embedder = auto``: those of its language), the others skipped."""
    done = Reindexed(embedder, index.recorded().get(embedder))
    todo = index.missing(embedder, user, limit=10**9)
    if done.dim is not None and (todo or rebuild):
        probe = memory_texts.first_text(db) or "dimension check"
        now_dim = len(embed([probe])[0])
        if rebuild or now_dim != done.dim:
            if now_dim != done.dim:
                done.notices.append(
                    f"{embedder} now gives vectors of {now_dim} numbers, the stored ones have "
                    f"{done.dim}: they are all computed again"
                )
            done.dropped = index.drop(embedder)
            done.dim = None
            todo = index.missing(embedder, user, limit=10**9)
    started(len(todo))
    for start in range(0, len(todo), batch):
        ids = todo[start : start + batch]
        rows = memory_texts.texts_of(db, ids)
        if keep is not None:
            rows = [r for r in rows if keep(r.text)]
        if rows:
            vectors = embed([r.text for r in rows])
            if len(vectors) != len(rows):
                raise EmbedderError(
                    f"{embedder} gave {len(vectors)} vectors for {len(rows)} texts."
                )
            with db.transaction() as c:
                for row, vec in zip(rows, vectors, strict=True):
                    index.upsert(c, row.id, row.user_id, embedder, vec)
            done.computed += len(rows)
            done.dim = len(vectors[0])
        advanced(len(ids))
    return done


def current_embedder(settings: Any) -> str | None:
    """The embedder memory uses now (None: off)."""
    from novaberg.memory.embedding import choose

    return choose(settings).name


def embed_function(settings: Any, name: str | None) -> tuple[str, Embed, list[str]]:
    """The embedder to reindex with: ``name`` (an in-process embedder, or the backend's
    ``memory.embed_model``), else the one memory uses now; its batch function; notices."""
    from novaberg.embedders import NAMES
    from novaberg.memory.embedding import choose, embed_local, embed_now

    choice = choose(settings)
    if name is None:
        if choice.name is None:
            raise UsageError(
                "No embedder is chosen (memory.embedder = off): name one with --embedder "
                f"({', '.join(NAMES)})."
            )
        name = choice.name
    notices = list(choice.notices) if name == choice.name else []
    if name in NAMES:
        chosen = name

        def local(texts: Sequence[str]) -> list[list[float]]:
            return embed_local(chosen, texts, query=False, what="reindex").vectors

        return name, local, notices
    if choice.backend and name == choice.name:

        def backend(texts: Sequence[str]) -> list[list[float]]:
            return embed_now(settings, texts, query=False, what="reindex").vectors

        return name, backend, notices
    raise UsageError(
        f"Unknown embedder {name!r}: choose one of {', '.join(NAMES)}, or the backend model "
        "set as memory.embed_model."
    )


def command(user: str | None, embedder: str | None, rebuild: bool, as_json: bool) -> None:
    """``novaberg memory reindex``: a progress bar on stderr, the summary on stdout."""
    from novaberg.cli.common import guarded, load
    from novaberg.memory.embedding import per_text

    settings = guarded(lambda: load(user).settings)
    db = guarded(lambda: Database(settings.database, settings.timeouts.database_s))
    try:
        index = guarded(lambda: open_vector_index(db))
        if embedder is None and per_text(settings):
            done = _each_language(db, index, settings, user, rebuild)
            name = done.embedder
            notices: list[str] = []
        else:
            name, embed, notices = guarded(lambda: embed_function(settings, embedder))
            done = _with_progress(db, index, name, embed, user, rebuild, as_json)
    finally:
        db.close()
    _report(done, notices, index, name, as_json)


def _each_language(
    db: Database, index: VectorIndex, settings: Any, user: str | None, rebuild: bool
) -> Reindexed:
    """``memory.embedder = auto``: each item's vector from its own language's embedder."""
    from novaberg.cli.common import guarded
    from novaberg.memory.embedding import AUTO, choose

    total = Reindexed("+".join(dict.fromkeys(AUTO.values())), None)
    for name in dict.fromkeys(AUTO.values()):
        chosen, embed, notices = guarded(lambda n=name: embed_function(settings, n))  # type: ignore[misc]

        def mine(text: str, chosen: str = chosen) -> bool:
            return choose(settings, text).name == chosen

        done = guarded(
            lambda c=chosen, e=embed, k=mine: reindex(  # type: ignore[misc]
                db, index, c, e, user=user, rebuild=rebuild, keep=k
            )
        )
        total.computed += done.computed
        total.dropped += done.dropped
        total.dim = total.dim or done.dim
        total.notices += [*notices, *done.notices]
    return total


def _with_progress(
    db: Database,
    index: VectorIndex,
    name: str,
    embed: Embed,
    user: str | None,
    rebuild: bool,
    as_json: bool,
) -> Reindexed:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from novaberg.cli.common import err_console, guarded

    with Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=as_json,
    ) as progress:
        task = progress.add_task(f"vectors ({name})", total=None)
        done: Reindexed = guarded(
            lambda: reindex(
                db,
                index,
                name,
                embed,
                user=user,
                rebuild=rebuild,
                started=lambda total: progress.update(task, total=total),
                advanced=lambda n: progress.advance(task, n),
            )
        )
    return done


def _report(
    done: Reindexed, notices: list[str], index: VectorIndex, name: str, as_json: bool
) -> None:
    import typer

    from novaberg.cli.safe import dumps, echo

    done.notices[:0] = notices
    if index.notice:
        done.notices.append(index.notice)
    if as_json:
        typer.echo(dumps({**done.view(), "mode": index.mode}))
        return
    for notice in done.notices:
        echo(f"notice: {notice}", err=True)
    if done.dropped:
        echo(f"Removed {done.dropped} vector(s) of {name} first.")
    if done.computed:
        echo(
            f"Computed {done.computed} vector(s) with {name} ({done.dim} numbers each); "
            f"search by meaning uses {index.mode}."
        )
    else:
        echo(f"Every memory already has a vector of {name}; nothing to do.")
