"""Run a verbose ``pip install`` and show its progress in a few lines (``make setup`` uses it).

``pip --quiet`` says nothing for the minutes that llama.cpp takes to build, which a newcomer
cannot tell from a hang; ``pip -v`` says thousands of lines. This runs the command given after
``--``, writes everything it prints to LOG, and shows only: when downloading starts, each
package whose wheel is built, the compile steps of a build every 10% (from the build's own
``[n/total]`` lines), and the end. When the command fails, the last lines of the log follow.
Exits with the command's status. Standard library only: it runs before the venv has packages.

    python tools/install_progress.py LOG -- python -m pip install -v -e ".[embedded,dev]"
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")
BUILDING = re.compile(r"Building wheel for (\S+) .*: started")
INSTALLED = re.compile(r"^Successfully installed (.*)")
TAIL_LINES = 40


def _elapsed(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class Progress:
    """Turns pip's verbose lines into the few worth showing."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.fetching = False
        self.shown_tenths = -1

    def line(self, text: str) -> str | None:
        if not self.fetching and text.startswith("Collecting "):
            self.fetching = True
            return "  downloading packages …"
        if match := BUILDING.search(text):
            self.shown_tenths = -1
            return f"  building {match.group(1)} ({_elapsed(self.started)} so far) …"
        if match := STEP.match(text):
            done, total = int(match.group(1)), int(match.group(2))
            tenths = done * 10 // total if total else 0
            if tenths > self.shown_tenths:
                self.shown_tenths = tenths
                return f"    compiled {done} of {total} steps ({_elapsed(self.started)})"
            return None
        if match := INSTALLED.match(text):
            count = len(match.group(1).split())
            noun = "package" if count == 1 else "packages"
            return f"  installed {count} {noun} in {_elapsed(self.started)}"
        return None


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    log_path, command = Path(argv[0]), argv[2:]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    progress = Progress(time.monotonic())
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    with log_path.open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        )
        assert proc.stdout is not None
        for raw in proc.stdout:
            log.write(raw)
            text = raw.rstrip("\n")
            tail.append(text)
            shown = progress.line(text)
            if shown is not None:
                print(shown, flush=True)
        status = proc.wait()
    if status != 0:
        print(f"The install failed (exit {status}); the last lines of {log_path}:", flush=True)
        print("\n".join(tail), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
