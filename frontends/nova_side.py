"""What Nova stored, read through her own public doors: ``/api/conversations``, their messages,
``/api/turns/{id}``, ``/api/memory`` and its jobs, asked as the end user the front-end names
(the front-end's key and a JWT signed with the shared secret, as Open WebUI sends it)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from tests.server_helpers import Nova

FRONTEND_USER = "webui"
"""The Novaberg user of the front-end's key: its end users are ``webui/<Open WebUI id>``."""
JWT_SECRET = secrets.token_urlsafe(48)
"""Shared by Open WebUI (FORWARD_USER_INFO_HEADER_JWT_SECRET) and Nova
(NOVABERG_FRONTEND_JWT_SECRET), at least 32 bytes: a new one for each session."""
UNSETTLED = {"pending", "running"}
"""A background memory job in one of these states still has model calls to make."""


@dataclass
class EndUser:
    nova: Nova
    key: str
    secret: str
    sub: str
    """Open WebUI's user id."""

    @property
    def name(self) -> str:
        return f"{FRONTEND_USER}/{self.sub}"

    def headers(self) -> dict[str, str]:
        now = int(time.time())
        claims = {"sub": self.sub, "iss": "open-webui", "iat": now, "exp": now + 300}
        token = jwt.encode(claims, self.secret, algorithm="HS256")
        return {"Authorization": f"Bearer {self.key}", "X-OpenWebUI-User-Jwt": token}

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(
            f"{self.nova.url}{path}", params=params, headers=self.headers(), timeout=30
        )

    def json(self, path: str, **params: Any) -> Any:
        response = self.get(path, **params)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()

    def conversations(self) -> list[dict[str, Any]]:
        """The end user's conversations, oldest first."""
        return sorted(self.json("/api/conversations")["items"], key=lambda c: int(c["id"]))

    def messages(self, conversation: int) -> list[dict[str, Any]]:
        return list(self.json(f"/api/conversations/{conversation}/messages")["items"])

    def stored(self, conversation: int) -> list[tuple[str, str]]:
        return [(m["role"], m["content"]) for m in self.messages(conversation)]

    def memories(self) -> list[dict[str, Any]]:
        return list(self.json("/api/memory")["items"])

    def memory_texts(self) -> list[str]:
        return sorted(str(m.get("text", "")) for m in self.memories())

    def jobs(self) -> list[dict[str, Any]]:
        return list(self.json("/api/memory/jobs")["items"])

    def jobs_settled(self) -> bool:
        return not any(str(j["status"]) in UNSETTLED for j in self.jobs())

    def turn(self, turn_id: int) -> httpx.Response:
        return self.get(f"/api/turns/{turn_id}")
