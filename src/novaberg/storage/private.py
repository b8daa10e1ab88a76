"""Private data files: the one door through which Novaberg creates its home and files in it.

What Novaberg keeps (conversations, memories, traces, key hashes) is for the account that runs
it: :func:`private_dir` creates a folder 0700 and :func:`private_file` a file 0600, whatever the
umask (a mode given at creation is only ever narrowed by it, so the process-wide umask is never
touched). SQLite gives the ``-wal``, ``-shm`` and ``-journal`` files it adds the mode of the
database file, so a database created through :func:`private_file` keeps them private too.

An existing folder or file keeps the mode it has (the user may have chosen it, or an older
Novaberg made it 0755/0644): :func:`exposed` lists those that other accounts can open, with
the ``chmod`` that fixes each, for ``novaberg doctor``.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
OTHERS = 0o077
"""The bits that let the owner's group or other accounts read, write or enter."""
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create the folder ``path`` 0700 if it is missing (missing parents get the usual mode);
    an existing one is left as it is."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty and 0600 (its folder through :func:`private_dir`) if it is
    missing; an existing file is left as it is, content and mode."""
    private_dir(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, PRIVATE_FILE_MODE)
    except FileExistsError:
        return path
    os.close(fd)
    return path


def sqlite_files(database: Path) -> list[Path]:
    """The SQLite file and the side files SQLite keeps next to it."""
    return [database, *(database.with_name(database.name + s) for s in SQLITE_SIDE_FILES)]


@dataclass(frozen=True)
class FileMode:
    """One path ``novaberg doctor`` looked at, with its permission bits."""

    path: Path
    mode: int
    is_dir: bool

    @property
    def private(self) -> bool:
        return not self.mode & OTHERS

    @property
    def shown_mode(self) -> str:
        return f"{self.mode:04o}"

    @property
    def fix(self) -> str | None:
        """What to run to make it private (``None`` when it is)."""
        if self.private:
            return None
        wanted = PRIVATE_DIR_MODE if self.is_dir else PRIVATE_FILE_MODE
        return f"chmod {wanted:o} {shlex.quote(str(self.path))}"

    @property
    def warning(self) -> str | None:
        """The path, its mode and the fix; ``None`` when it is private."""
        if self.fix is None:
            return None
        return (
            f"{self.path} has mode {self.shown_mode}: other accounts on this machine can "
            f"open it; run `{self.fix}`"
        )


def file_modes(paths: list[Path]) -> list[FileMode]:
    """The mode of each path that exists (a missing one is skipped). None on Windows, whose
    access rules are not in the mode bits."""
    if os.name == "nt":
        return []
    found = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        found.append(FileMode(path, stat.S_IMODE(st.st_mode), stat.S_ISDIR(st.st_mode)))
    return found


def exposed(found: list[FileMode]) -> list[str]:
    """A warning for each path other accounts can open."""
    return [f.warning for f in found if f.warning is not None]
