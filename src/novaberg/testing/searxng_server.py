"""A fake SearxNG instance (its JSON API, ``GET /search?q=…&format=json``) for tests of
``web_search`` that must not touch the internet."""

from __future__ import annotations

import threading
from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse

from novaberg.testing.serve import ThreadedServer


class SearxngTestServer:
    """Answers every query with the results set for it (or for ``"*"``); records queries."""

    def __init__(self) -> None:
        self.results: dict[str, list[dict[str, str]]] = {}
        self.queries: list[str] = []
        self.status = 200
        self._lock = threading.Lock()
        app = FastAPI(docs_url=None, redoc_url=None)

        @app.get("/search")
        async def search(q: str = Query(""), format: str = Query("html")) -> JSONResponse:
            with self._lock:
                self.queries.append(q)
                found = self.results.get(q, self.results.get("*", []))
            if format != "json":
                return JSONResponse({"error": "only format=json here"}, status_code=400)
            if self.status != 200:
                return JSONResponse({"error": "scripted failure"}, status_code=self.status)
            return JSONResponse({"query": q, "results": found})

        self._runner = ThreadedServer(app)

    @property
    def url(self) -> str:
        return self._runner.url

    def answer(self, query: str, *results: dict[str, Any]) -> None:
        with self._lock:
            self.results[query] = [dict(r) for r in results]

    def __enter__(self) -> SearxngTestServer:
        self._runner.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._runner.stop()
