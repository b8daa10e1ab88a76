"""A Novaberg process for the crash test: turns and memory jobs, forever, until killed.

Prints ``ACK turn T memory M`` only after the turn's transaction committed, and ``ACK job E
STATUS`` only after the job's did: what it acknowledged must survive a SIGKILL. With
``--drain`` it runs only the jobs left waiting and exits.
"""

from __future__ import annotations

import asyncio
import sys

from novaberg.config import load_settings
from novaberg.engine import Engine


async def main(drain: bool) -> None:
    engine = await Engine.open(load_settings().settings)
    await engine.warmed()  # the kills should land in turns and jobs, not in loading the embedder
    print("READY", flush=True)
    try:
        for outcome in await engine.run_background():
            print(f"ACK job {outcome.event_id} {outcome.status}", flush=True)
        if drain:
            return
        n = 0
        while True:
            n += 1
            result = await engine.run_turn(f"Important thing number {n}: I adopted a cat.")
            print(f"ACK turn {result.turn_id} memory {result.memory_id}", flush=True)
            for outcome in await engine.run_background():
                print(f"ACK job {outcome.event_id} {outcome.status}", flush=True)
    finally:
        await engine.aclose()


if __name__ == "__main__":
    asyncio.run(main("--drain" in sys.argv))
