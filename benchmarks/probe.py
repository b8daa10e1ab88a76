"""``novaberg probe``'s wall time: ``python -m benchmarks.probe``.

Every experiment with 20 trials against the test server (its own process) at 200 ms per chat
call, with the probe's own concurrency (the backend's ``concurrency.ollama`` setting, 3 by
default). The backend-bound limit is what the server's delay alone costs when every slot is
always busy: requests × delay / concurrency. Goal (issue 12): wall time within 1.2× of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.__main__ import separate_server
from novaberg.config import load_settings
from novaberg.probe import run_probe
from novaberg.storage.db import Database


async def measure(url: str, home: Path, trials: int, delay_s: float) -> dict[str, Any]:
    os.environ.update(OLLAMA_HOST=url, NOVABERG_BACKEND="ollama", NOVABERG_HOME=str(home))
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        started = time.perf_counter()
        report = await run_probe(settings, db, trials=trials)
        wall = time.perf_counter() - started
    finally:
        db.close()
    concurrency = settings.concurrency.ollama
    bound = report.requests * delay_s / concurrency
    return {
        "trials": trials,
        "delay_ms": delay_s * 1000,
        "concurrency": concurrency,
        "requests": report.requests,
        "answered": report.answered,
        "wall_s": round(wall, 2),
        "backend_bound_s": round(bound, 2),
        "ratio": round(wall / bound, 3),
        "goal": "≤ 1.2",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=200.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results/probe.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, separate_server(args.delay_ms) as url:
        result = asyncio.run(measure(url, Path(home), args.trials, args.delay_ms / 1000))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
