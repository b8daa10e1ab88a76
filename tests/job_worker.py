"""A Novaberg process for the job-claim test: opens the engine, prints ``READY``, waits for a
line on stdin (so that several workers start together), runs the waiting memory jobs, and
prints their outcomes as one JSON line."""

from __future__ import annotations

import asyncio
import json
import sys

from novaberg.config import load_settings
from novaberg.engine import Engine


async def main() -> None:
    engine = await Engine.open(load_settings().settings)
    try:
        print("READY", flush=True)
        sys.stdin.readline()
        outcomes = await engine.run_background()
        print(json.dumps([[o.event_id, o.type, o.status] for o in outcomes]), flush=True)
    finally:
        await engine.aclose()


if __name__ == "__main__":
    asyncio.run(main())
