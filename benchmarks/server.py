"""``novaberg serve`` under load: ``python -m benchmarks.server`` (issue 9's figures).

The server runs in THIS process's event loop (the same app ``novaberg serve`` runs), with a
ticker task that measures how late the loop wakes it: the longest stall. The clients run in a
child process (``python -m benchmarks.server --client …``), so their work never counts as the
server's; the test server runs in a third process.

1. HTTP overhead per turn at 0 ms per call: median ``POST /api/turns`` seen by the client
   minus the median ``Engine.run_turn`` in-process (same engine settings, same test server).
2. Throughput: 20 conversations at once, 200 ms per call, ``concurrency.ollama = 3``: turns
   done ÷ the backend-bound limit (slots × wall seconds ÷ slot-seconds per turn, the latter
   from the recorded calls of those turns); p95 turn latency; backend slot utilisation.
3. The longest event-loop stall during that load (goal < 20 ms).
4. Time to the first streamed byte and to the first ``content`` token of ``/v1`` streaming,
   and a small request (``GET /v1/models``) on the client's kept-alive connection against one
   on a new connection each time (the figures of issue 19: 44 ms against 0.8 ms while
   ``TCP_NODELAY`` was off). Every client here reuses its connection, as the ``openai``
   client, Open WebUI and browsers do; the server listens as ``novaberg serve`` does.
5. Server memory (RSS) after 1,000 turns at 0 ms, against after a 100-turn warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from benchmarks.__main__ import separate_server
from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.server.app import create_app
from novaberg.server.listen import bind, uvicorn_config
from novaberg.storage.api_users import UserStore
from novaberg.storage.db import Database


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class LoopTicker:
    """How late the loop runs a task that asks to wake every ``interval`` seconds."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.interval)
            self.worst = max(self.worst, loop.time() - before - self.interval)

    def start(self) -> None:
        self.worst = 0.0
        self._task = asyncio.create_task(self._tick())

    async def stop(self) -> float:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        return self.worst


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _environment(home: Path, backend_url: str, concurrency: int) -> None:
    for key in [k for k in os.environ if k.startswith("NOVABERG_")]:
        del os.environ[key]
    os.environ.update(
        NOVABERG_HOME=str(home),
        OLLAMA_HOST=backend_url,
        NOVABERG_BACKEND="ollama",
        NOVABERG_CONCURRENCY__OLLAMA=str(concurrency),
        NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE="0",  # the server is measured, not its limiter
    )


async def _client(mode: str, url: str, key: str, **options: Any) -> dict[str, Any]:
    """Run the load in a child process; its JSON result."""
    args = [sys.executable, "-m", "benchmarks.server", "--client", mode, url, key]
    args += [json.dumps(options)]
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the load client ({mode}) failed with exit code {proc.returncode}")
    result: dict[str, Any] = json.loads(out)
    return result


async def _serve() -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    """The app on a socket and a uvicorn configuration exactly as ``novaberg serve`` makes
    them (:mod:`novaberg.server.listen`: ``TCP_NODELAY``, timeouts, limits)."""
    settings = load_settings().settings
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(settings, listen_host="127.0.0.1")
    config = uvicorn_config(app, settings, verbose=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, no event
        await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{port}"


def _key(home: Path) -> str:
    db = Database(home / "novaberg.db")
    try:
        return UserStore(db).add("bench")
    finally:
        db.close()


async def overhead(backend_url: str, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _environment(home / "engine", backend_url, 3)
        engine = await Engine.open(load_settings().settings)
        direct = []
        try:
            for i in range(turns):
                started = time.perf_counter()
                await engine.run_turn(f"Plain message number {i}.")
                direct.append((time.perf_counter() - started) * 1000)
        finally:
            await engine.aclose()
        _environment(home / "serve", backend_url, 3)
        key = _key(home / "serve")
        server, task, url = await _serve()
        try:
            seen = await _client("turns", url, key, turns=turns)
            stream = await _client("stream", url, key, turns=max(5, turns // 2))
            small = await _client("requests", url, key, requests=max(20, turns))
        finally:
            server.should_exit = True
            await task
    return {
        "engine_turn_ms_median": statistics.median(direct),
        "http_turn_ms_median": statistics.median(seen["ms"]),
        "http_overhead_ms_median": statistics.median(seen["ms"]) - statistics.median(direct),
        "first_byte_ms_median": statistics.median(stream["first_byte_ms"]),
        "first_content_ms_median": statistics.median(stream["first_content_ms"]),
        "turn_ms_median_streamed": statistics.median(stream["total_ms"]),
        "request_ms_median_reused_connection": statistics.median(small["reused_ms"]),
        "request_ms_median_new_connection": statistics.median(small["new_ms"]),
    }


async def throughput(
    backend_url: str, delay_s: float, conversations: int, turns: int, slots: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _environment(home, backend_url, slots)
        key = _key(home)
        ticker = LoopTicker()
        ticker.start()
        server, task, url = await _serve()
        try:
            await server.config.app.state.engine.warmed()  # the embedder's load, dateparser's
            startup_stall = await ticker.stop()
            ticker.start()
            started = time.perf_counter()
            load = await _client("load", url, key, conversations=conversations, turns=turns)
            wall = time.perf_counter() - started
            stall = await ticker.stop()
        finally:
            server.should_exit = True
            await task
        db = Database(home / "novaberg.db")
        try:
            turn_calls = int(
                db.scalar(
                    "SELECT COUNT(*) FROM llm_calls c JOIN turns t ON t.id = c.turn_id "
                    "WHERE t.origin = 'user'"
                )
            )
            all_calls = int(db.scalar("SELECT COUNT(*) FROM llm_calls"))
            done = int(db.scalar("SELECT COUNT(*) FROM turns WHERE status = 'done'"))
        finally:
            db.close()
    finished = conversations * turns - load["errors"]
    slot_seconds_per_turn = turn_calls / max(1, done) * delay_s
    limit = slots * wall / slot_seconds_per_turn
    return {
        "conversations": conversations,
        "turns_each": turns,
        "errors": load["errors"],
        "wall_s": wall,
        "calls_per_turn": turn_calls / max(1, done),
        "throughput_share_of_limit": finished / limit,
        "slot_utilisation": all_calls * delay_s / (slots * wall),
        "turn_ms_p50": _p(load["ms"], 0.5),
        "turn_ms_p95": _p(load["ms"], 0.95),
        "longest_loop_stall_ms": stall * 1000,
        "longest_loop_stall_ms_while_starting": startup_stall * 1000,
    }


async def memory_growth(backend_url: str, warmup: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _environment(home, backend_url, 3)
        key = _key(home)
        server, task, url = await _serve()
        try:
            await _client("load", url, key, conversations=4, turns=warmup // 4)
            warm = _rss_mb()
            await _client("load", url, key, conversations=4, turns=turns // 4)
            after = _rss_mb()
        finally:
            server.should_exit = True
            await task
    return {
        "rss_mb_after_warmup": warm,
        "rss_mb_after": after,
        "turns_after_warmup": turns,
        "growth_share": (after - warm) / warm,
    }


# -- the client process ------------------------------------------------------------------------
async def _client_main(mode: str, url: str, key: str, options: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=600) as http:
        if mode == "turns":
            ms = []
            for i in range(options["turns"]):
                started = time.perf_counter()
                r = await http.post("/api/turns", json={"message": f"Plain message number {i}."})
                r.raise_for_status()
                ms.append((time.perf_counter() - started) * 1000)
            return {"ms": ms}
        if mode == "requests":  # GET /v1/models: on the kept-alive connection, then new ones
            reused, new = [], []
            for _ in range(options["requests"]):
                started = time.perf_counter()
                (await http.get("/v1/models")).raise_for_status()
                reused.append((time.perf_counter() - started) * 1000)
            for _ in range(options["requests"]):
                async with httpx.AsyncClient(base_url=url, headers=headers) as fresh:
                    started = time.perf_counter()
                    (await fresh.get("/v1/models")).raise_for_status()
                    new.append((time.perf_counter() - started) * 1000)
            return {"reused_ms": reused, "new_ms": new}
        if mode == "stream":
            first_byte, first_content, total = [], [], []
            for i in range(options["turns"]):
                started = time.perf_counter()
                body = {
                    "model": "nova",
                    "stream": True,
                    "messages": [{"role": "user", "content": f"Streamed message {i}."}],
                }
                byte_at = content_at = None
                async with http.stream("POST", "/v1/chat/completions", json=body) as r:
                    r.raise_for_status()
                    async for line in r.aiter_lines():
                        now = (time.perf_counter() - started) * 1000
                        if byte_at is None:
                            byte_at = now
                        if content_at is None and line.startswith("data: {"):
                            delta = json.loads(line[6:])["choices"]
                            if delta and delta[0]["delta"].get("content"):
                                content_at = now
                first_byte.append(byte_at or float("nan"))
                first_content.append(content_at or float("nan"))
                total.append((time.perf_counter() - started) * 1000)
            return {
                "first_byte_ms": first_byte,
                "first_content_ms": first_content,
                "total_ms": total,
            }
        # "load": conversations at once, each its turns one after another
        ms: list[float] = []
        errors = 0

        async def conversation(index: int) -> None:
            nonlocal errors
            conversation_id = None
            for turn in range(options["turns"]):
                body: dict[str, Any] = {"message": f"Conversation {index}, message {turn}."}
                if conversation_id is not None:
                    body["conversation_id"] = conversation_id
                started = time.perf_counter()
                r = await http.post("/api/turns", json=body)
                if r.status_code != 200:
                    errors += 1
                    continue
                ms.append((time.perf_counter() - started) * 1000)
                conversation_id = r.json()["conversation_id"]

        await asyncio.gather(*(conversation(i) for i in range(options["conversations"])))
        return {"ms": ms, "errors": errors}


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with separate_server(0) as fast:
        results["overhead"] = await overhead(fast, args.turns)
        results["memory"] = await memory_growth(fast, args.warmup, args.growth_turns)
    with separate_server(args.delay_ms) as slow:
        results["throughput"] = await throughput(
            slow, args.delay_ms / 1000, args.conversations, args.conversation_turns, 3
        )
    return results


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        mode, url, key, options = sys.argv[2:6]
        print(json.dumps(asyncio.run(_client_main(mode, url, key, json.loads(options)))))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--delay-ms", type=float, default=200)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--conversation-turns", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--growth-turns", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("bench-results/server.json"))
    args = parser.parse_args()
    results = asyncio.run(_main(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
