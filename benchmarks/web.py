"""The web page's figures (``python -m benchmarks.web``), in a real browser (Debian's chromium
through Playwright) against a real ``novaberg serve`` over the test server at 0 ms per call:

1. From Ctrl+Enter to the first progress the page shows (a pipeline node named on the live
   line; the page's own "Sending…" does not count) and to the first answer text in Nova's
   message, each the median of N turns (goal: under 150 ms beyond the backend's own time).
   Times are taken when the DOM changed (a MutationObserver), in the page's clock. What the
   server itself takes is measured the same way without a browser: an httpx client posting
   ``/api/turns?stream=true`` and timing the first ``progress`` and the first ``token`` event
   (turns alternate between the two). The page's share is the difference of the medians; and,
   measured inside the page in the same turn, ``page_own_*``: the time from the key press to
   the request leaving ``fetch()`` plus the time from the event's bytes arriving (the stream
   reader's chunk) to the DOM showing it.
2. Page weight: HTML + CSS + JavaScript as served, uncompressed (goal: under 200 KB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect, sync_playwright

from benchmarks.__main__ import separate_server
from novaberg.server.web import page_weight
from novaberg.storage.api_users import UserStore
from novaberg.storage.db import Database

OBSERVE = """() => {
  window.__bench = null;
  const fetchOrig = window.fetch;
  window.fetch = function (...args) {
    const b = window.__bench;
    if (b && b.fetch === null && String(args[0]).startsWith('/api/turns'))
      b.fetch = performance.now() - b.t0;
    return fetchOrig.apply(this, args);
  };
  const readOrig = ReadableStreamDefaultReader.prototype.read;
  ReadableStreamDefaultReader.prototype.read = function () {
    return readOrig.call(this).then((r) => {
      const b = window.__bench;
      if (b && typeof r.value === 'string') {
        const now = performance.now() - b.t0;
        if (b.progressChunk === null && r.value.includes('event: progress'))
          b.progressChunk = now;
        if (b.tokenChunk === null && r.value.includes('event: token')) b.tokenChunk = now;
      }
      return r;
    });
  };
  const box = document.getElementById('message');
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && e.ctrlKey)
      window.__bench = {t0: performance.now(), progress: null, answer: null, fetch: null,
                        progressChunk: null, tokenChunk: null};
  }, {capture: true});
  new MutationObserver(() => {
    const b = window.__bench;
    if (!b) return;
    const now = performance.now();
    if (b.progress === null && document.getElementById('progress').textContent
        .startsWith('Working')) b.progress = now - b.t0;
    const texts = document.querySelectorAll('#messages .message.nova .text');
    if (b.answer === null && texts.length && texts[texts.length - 1].textContent)
      b.answer = now - b.t0;
  }).observe(document.getElementById('main'),
             {childList: true, characterData: true, subtree: true});
}"""


@contextmanager
def serve(backend_url: str) -> Iterator[tuple[str, str]]:
    """``novaberg serve`` over ``backend_url`` in a fresh home; yields (url, key)."""
    home = Path(tempfile.mkdtemp(prefix="novaberg-bench-web-"))
    db = Database(home / "novaberg.db")
    try:
        key = UserStore(db).add("bench")
    finally:
        db.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOVABERG_")}
    env |= {
        "NOVABERG_HOME": str(home),
        "OLLAMA_HOST": backend_url,
        "NOVABERG_BACKEND": "ollama",
        "NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": "0",
    }
    out = home / "serve.out"
    with out.open("wb") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "novaberg", "serve", "--port", "0"],
            env=env,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        url = ""
        while not url:
            for line in out.read_text(encoding="utf-8").splitlines():
                if line.startswith("novaberg serve: http://"):
                    url = line.split()[2]
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("novaberg serve did not start")
            time.sleep(0.05)
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("novaberg serve did not answer /healthz")
            time.sleep(0.05)
        yield url, key
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(home, ignore_errors=True)


def one_turn(page: Page, url: str, key: str, n: int) -> dict[str, float]:
    page.get_by_role("button", name="New conversation").click()
    box = page.get_by_label("Message to Nova")
    box.fill(f"Hello Nova, this is turn {n}.")
    box.press("Control+Enter")
    done = page.locator("#messages .message.nova .why-button")
    expect(done).to_have_count(1, timeout=30_000)
    expect(page.locator("#progress")).to_have_text("", timeout=30_000)
    bench: dict[str, Any] = page.evaluate("window.__bench")
    out = {"progress": bench["progress"], "answer": bench["answer"]}
    if None not in (bench["fetch"], bench["progressChunk"], bench["progress"]):
        # the page's own time: before the request left, and from the event's bytes to the DOM
        out["page_progress"] = bench["fetch"] + bench["progress"] - bench["progressChunk"]
    if None not in (bench["fetch"], bench["tokenChunk"], bench["answer"]):
        out["page_answer"] = bench["fetch"] + bench["answer"] - bench["tokenChunk"]
    return out


def raw_turn(client: httpx.Client, url: str, key: str, n: int) -> dict[str, float]:
    """The same turn through httpx: the server's time to its first progress and token."""
    first: dict[str, float] = {}
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    body = {"message": f"Hello Nova, this is the other client's turn {n}."}
    t0 = time.perf_counter()
    with client.stream(
        "POST", f"{url}/api/turns?stream=true", json=body, headers=headers, timeout=30
    ) as response:
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = {"progress": "progress", "token": "answer"}.get(line[7:].strip())
                if name and name not in first:
                    first[name] = (time.perf_counter() - t0) * 1000
    return first


def measure(turns: int) -> dict[str, Any]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    rows: list[dict[str, float]] = []
    raws: list[dict[str, float]] = []
    with (
        separate_server(0) as backend_url,
        serve(backend_url) as (url, key),
        sync_playwright() as p,
        httpx.Client() as client,  # one kept-alive connection, as the browser has
    ):
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(url + "/")
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#nav")).to_be_visible()
        page.evaluate(OBSERVE)
        one_turn(page, url, key, 0)  # warm-up
        raw_turn(client, url, key, 0)
        for n in range(1, turns + 1):
            rows.append(one_turn(page, url, key, n))
            raws.append(raw_turn(client, url, key, n))
        browser.close()

    def median(of: list[dict[str, float]], name: str) -> float | None:
        seen = [r[name] for r in of if r.get(name) is not None]
        return round(statistics.median(seen), 1) if seen else None

    figures: dict[str, Any] = {"turns": turns}
    for name in ("progress", "answer"):
        page_ms, server_ms = median(rows, name), median(raws, name)
        figures[f"enter_to_first_{name}_ms"] = page_ms
        figures[f"server_to_first_{name}_ms"] = server_ms
        figures[f"page_share_{name}_ms"] = (
            None if page_ms is None or server_ms is None else round(page_ms - server_ms, 1)
        )
        figures[f"page_own_{name}_ms"] = median(rows, f"page_{name}")
    figures["page_weight_bytes"] = page_weight()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps(measure(args.turns), indent=2))


if __name__ == "__main__":
    main()
