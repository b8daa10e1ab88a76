"""Open WebUI 0.12.4's voice mode through Nova's ``/v1/audio`` routes (issue 27): its Audio
settings set as the README says (engine OpenAI, base URL Nova's ``/v1``, the front-end's key),
then one of its users has a sentence spoken and hears it transcribed back, through Open WebUI's
own ``/api/v1/audio`` routes as its page calls them. Nova's side: both requests reached her
audio routes, as that user (Open WebUI signs its user into them), and answered 200."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.server_helpers import Nova

from frontends.nova_side import FRONTEND_USER
from frontends.openwebui import OpenWebUI
from frontends.proxy import RecordingProxy
from novaberg.speech.wer import word_error_rate

pytest.importorskip("faster_whisper", reason="the voice extra is not installed")

SAID = "Tomorrow I will walk to the park with my sister."
OPTIONAL = ("OPENAI_PARAMS", "REALTIME_TTS_PROMPT_TEMPLATE")
"""Fields of Open WebUI's audio settings that may stay empty (null)."""


def audio_settings(webui: OpenWebUI, nova_v1: str, key: str) -> dict[str, Any]:
    """Open WebUI's audio settings as they are, with Nova for speech in and out."""
    admin = {"Authorization": f"Bearer {webui.admin_token}"}
    current = httpx.get(f"{webui.url}/api/v1/audio/config", headers=admin, timeout=30)
    assert current.status_code == 200, current.text
    settings: dict[str, Any] = current.json()
    for part in ("tts", "stt"):
        section = settings[part]
        for name in [k for k, v in section.items() if v is None]:
            if name in OPTIONAL:
                del section[name]
            else:
                section[name] = ""
        section |= {"ENGINE": "openai", "OPENAI_API_BASE_URL": nova_v1, "OPENAI_API_KEY": key}
    settings["tts"] |= {"MODEL": "tts-1", "VOICE": "nova"}
    settings["stt"] |= {"MODEL": "whisper-1"}
    settings.pop("realtime", None)
    return settings


def test_open_webuis_voice_mode_speaks_and_hears_through_novas_audio_routes(
    openwebui: OpenWebUI, nova: Nova, proxy: RecordingProxy
) -> None:
    settings = audio_settings(openwebui, f"{proxy.url}/v1", nova.keys[FRONTEND_USER])
    admin = {"Authorization": f"Bearer {openwebui.admin_token}"}
    saved = httpx.post(
        f"{openwebui.url}/api/v1/audio/config/update", json=settings, headers=admin, timeout=30
    )
    assert saved.status_code == 200, saved.text
    account = openwebui.add_user("Vera Voice")
    signin = httpx.post(
        f"{openwebui.url}/api/v1/auths/signin",
        json={"email": account.email, "password": account.password},
        timeout=30,
    )
    assert signin.status_code == 200, signin.text
    user = {"Authorization": f"Bearer {signin.json()['token']}"}
    mark = proxy.mark()
    spoken = httpx.post(
        f"{openwebui.url}/api/v1/audio/speech",
        json={"input": SAID, "voice": "nova"},
        headers=user,
        timeout=120,
    )
    assert spoken.status_code == 200, spoken.text
    assert len(spoken.content) > 4000
    heard = httpx.post(
        f"{openwebui.url}/api/v1/audio/transcriptions",
        files={"file": ("said.mp3", spoken.content, "audio/mpeg")},
        data={"language": "en"},
        headers=user,
        timeout=120,
    )
    assert heard.status_code == 200, heard.text
    assert word_error_rate([(SAID, heard.json()["text"])]) <= 0.15, heard.json()
    reached = {e.path: e for e in proxy.since(mark) if e.path.startswith("/v1/audio/")}
    assert {"/v1/audio/speech", "/v1/audio/transcriptions"} <= set(reached), list(reached)
    for exchange in reached.values():
        assert exchange.status == 200, exchange.summary()
        assert "x-openwebui-user-jwt" in exchange.headers  # as that user, not the front-end
