"""The real Open WebUI 0.12.4 (from PyPI, in a venv of its own: ``make frontends`` builds it) as
a process in front of Nova, its accounts made over its own API, and its chat page driven in
chromium the way a person uses it. What the selectors name was read off 0.12.4's UI: the chat
input ``#chat-input`` (a ProseMirror editor), ``#send-message-button``, the Stop button
(aria-label ``Stop``), a reply's ``Regenerate`` button and its menu's ``Try Again``, a user
message's ``Edit`` button with its ``#confirm-edit-message-button`` (Send), follow-up
suggestions as buttons named ``Follow up: …``."""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("OPENWEBUI_VENV", ROOT / ".frontends" / "openwebui-venv"))
if not VENV.is_absolute():
    VENV = ROOT / VENV
VERSION = "0.12.4"
START_TIMEOUT_S = 240.0
"""A first start runs its migrations (48 s measured on 2 cores; 14 s later)."""
UI_TIMEOUT_MS = 60_000
"""How long the page may take to show what a step waits for (2 busy cores)."""


def poll(
    condition: Callable[[], bool],
    what: str,
    timeout_s: float = 60.0,
    explain: Callable[[], str] | None = None,
) -> None:
    """Wait until ``condition`` (a real state: a request seen, a row stored) holds; on a
    timeout, fail with ``explain()`` (what was seen meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            seen = f"\n{explain()}" if explain is not None else ""
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}{seen}")
        time.sleep(0.1)


@dataclass
class Account:
    name: str
    email: str
    password: str
    id: str
    """Open WebUI's user id: the ``sub`` of the JWT it forwards, Nova's ``webui/<id>``."""


@dataclass
class OpenWebUI:
    url: str
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes]
    admin_token: str = ""

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def add_user(self, name: str) -> Account:
        """A new Open WebUI user (role ``user``), made by the admin as its admin panel does."""
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        email = f"{slug}-{secrets.token_hex(3)}@example.com"
        password = "pw-" + secrets.token_hex(8)
        response = httpx.post(
            f"{self.url}/api/v1/auths/add",
            json={"name": name, "email": email, "password": password, "role": "user"},
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return Account(name, email, password, response.json()["id"])


def openwebui_env(
    data_dir: Path, openai_url: str, key: str, jwt_secret: str, ollama_url: str | None = None
) -> dict[str, str]:
    """Open WebUI's environment in front of Nova: offline, one OpenAI connection, the user
    forwarded as a signed JWT, every user allowed the models, default task settings;
    ``ollama_url``: also an Ollama connection, to other models (Nova's MCP server is a tool
    server of their chats)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env |= {
        "DATA_DIR": str(data_dir),
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "ENABLE_OLLAMA_API": "false" if ollama_url is None else "true",
        "ENABLE_OPENAI_API": "true",
        "OPENAI_API_BASE_URL": openai_url,
        "OPENAI_API_KEY": key,
        "WEBUI_SECRET_KEY": secrets.token_hex(32),
        "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
        "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
        "FORWARD_USER_INFO_HEADER_JWT_SECRET": jwt_secret,
        "BYPASS_MODEL_ACCESS_CONTROL": "true",
        "DEFAULT_MODELS": "nova",
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        "ANONYMIZED_TELEMETRY": "false",
        "DO_NOT_TRACK": "true",
        "SCARF_NO_ANALYTICS": "true",
    }
    if ollama_url is not None:
        env["OLLAMA_BASE_URL"] = ollama_url
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_openwebui(
    data_dir: Path, openai_url: str, key: str, jwt_secret: str, ollama_url: str | None = None
) -> Iterator[OpenWebUI]:
    """``open-webui serve`` on a free loopback port over a fresh ``data_dir``, with its admin
    signed up (the first account, over ``POST /api/v1/auths/signup``); stopped with SIGTERM."""
    exe = VENV / "bin" / "open-webui"
    if not exe.exists():
        pytest.fail(f"no Open WebUI at {exe}: `make frontends` installs it")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = data_dir.parent / "open-webui.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=openwebui_env(data_dir, openai_url, key, jwt_secret, ollama_url),
            cwd=data_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    webui = OpenWebUI(f"http://127.0.0.1:{port}", data_dir, log, proc)
    try:
        _wait_healthy(webui)
        version = httpx.get(f"{webui.url}/api/config", timeout=10).json()["version"]
        assert version == VERSION, f"Open WebUI {version} runs, not {VERSION}"
        signup = httpx.post(
            f"{webui.url}/api/v1/auths/signup",
            json={"name": "Admin", "email": "admin@example.com", "password": "pw-admin-1"},
            timeout=30,
        )
        assert signup.status_code == 200, signup.text
        webui.admin_token = signup.json()["token"]
        yield webui
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_healthy(webui: OpenWebUI) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if webui.proc.poll() is not None:
            pytest.fail(
                f"open-webui serve exited ({webui.proc.returncode}): {webui.logs()[-3000:]}"
            )
        try:
            if httpx.get(f"{webui.url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    pytest.fail(f"open-webui serve was not healthy within {START_TIMEOUT_S:.0f} s")


CHAT_URL = re.compile(r"/c/([0-9a-f-]{36})")


class ChatPage:
    """One person's Open WebUI tab: sign in, chat, regenerate, stop, edit."""

    def __init__(self, page: Page, webui: OpenWebUI) -> None:
        self.page = page
        self.webui = webui
        page.set_default_timeout(UI_TIMEOUT_MS)
        expect.set_options(timeout=UI_TIMEOUT_MS)

    @classmethod
    @contextmanager
    def signed_in(cls, browser: Browser, webui: OpenWebUI, account: Account) -> Iterator[ChatPage]:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            chat = cls(context.new_page(), webui)
            chat.sign_in(account)
            yield chat
        finally:
            context.close()

    def sign_in(self, account: Account) -> None:
        self.page.goto(f"{self.webui.url}/auth")
        self.page.locator("input[type=email]").fill(account.email)
        self.page.locator("input[type=password]").fill(account.password)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.input).to_be_visible()
        expect(self.page.locator("#model-selector-model-button")).to_contain_text("nova")

    @property
    def input(self) -> Locator:
        return self.page.locator("#chat-input")

    @property
    def stop_button(self) -> Locator:
        return self.page.locator("#message-input-container").get_by_role("button", name="Stop")

    def new_chat(self) -> None:
        self.page.goto(f"{self.webui.url}/")
        expect(self.input).to_be_visible()
        expect(self.page.locator(".user-message")).to_have_count(0)

    def send(self, text: str) -> None:
        """Type ``text`` into the chat input and press Send."""
        self.input.fill(text)
        expect(self.input).to_have_text(text)
        self.page.locator("#send-message-button").click()

    @property
    def chat_id(self) -> str:
        """The Open WebUI chat the page shows (its id is in the address once it is saved)."""
        expect(self.page).to_have_url(CHAT_URL)
        found = CHAT_URL.search(self.page.url)
        assert found is not None
        return found.group(1)

    def responses(self) -> Locator:
        return self.page.locator("#messages-container [id^=message-]:not(.user-message)")

    def user_messages(self) -> Locator:
        return self.page.locator("#messages-container .user-message")

    def wait_answered(self, count: int, text: str | None = None) -> None:
        """The page shows ``count`` replies, the last finished (its Regenerate button is
        there and Stop is gone), and containing ``text`` when given."""
        expect(self.responses()).to_have_count(count)
        last = self.responses().last
        expect(last.get_by_role("button", name="Regenerate", exact=True)).to_be_visible()
        expect(self.stop_button).to_have_count(0)
        if text is not None:
            expect(last).to_contain_text(text)

    def regenerate(self) -> None:
        """Regenerate the last reply: its Regenerate button opens a menu (a suggestion box,
        Try Again, Add Details, More Concise); Try Again is the plain regenerate."""
        last = self.responses().last
        last.hover()
        last.get_by_role("button", name="Regenerate", exact=True).click()
        self.page.get_by_role("button", name="Try Again", exact=True).click()

    def stop(self) -> None:
        self.stop_button.click()
        expect(self.stop_button).to_have_count(0)

    def edit(self, index: int, text: str) -> None:
        """Edit the ``index``-th user message (0 first) to ``text`` and press Send."""
        message = self.user_messages().nth(index)
        message.hover()
        message.get_by_role("button", name="Edit", exact=True).click()
        box = self.page.locator("#messages-container textarea[id^=message-edit-]")
        box.fill(text)
        self.page.locator("#confirm-edit-message-button").click()
        expect(box).to_have_count(0)
