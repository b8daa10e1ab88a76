"""Proactive messages in ``novaberg chat``: what arrived while it was closed, shown when it
starts, and what arrives while it is open (sent by ``novaberg serve`` or ``novaberg worker``),
printed as it comes by a watcher thread that polls the database every ``server.events_poll_s``.
Each is claimed for the chat first (:func:`~novaberg.storage.deliveries.claim_proactive`):
shown once, and never again by another chat or response."""

from __future__ import annotations

import threading
from collections.abc import Callable

from novaberg.errors import NovabergError
from novaberg.storage import deliveries
from novaberg.storage.db import Database


def arrived(db: Database, user: str) -> list[str]:
    """Blocking: the user's proactive messages not shown anywhere yet, claimed for the chat."""
    return [f.text for f in deliveries.claim_proactive(db, user, "inline")]


class Watcher:
    """A daemon thread calling ``show(text)`` for each proactive message that arrives."""

    def __init__(
        self, db: Database, user: str, interval_s: float, show: Callable[[str], None]
    ) -> None:
        self.db = db
        self.user = user
        self.interval_s = interval_s
        self.show = show
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="novaberg-arrivals", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                texts = arrived(self.db, self.user)
            except NovabergError:
                continue  # the database was busy: next time
            for text in texts:
                self.show(text)
