"""Hostile input to ``novaberg serve`` (issue 19's low findings): bodies that cannot be parsed,
values too long or with line breaks echoed in errors, malformed keys — each a clear 4xx in the
route's error shape, never a 500, never a forged line. One real server for the module."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from novaberg.testing import OllamaTestServer
from tests.server_helpers import Nova, running_nova

FORGED = "\nINFO: forged line"
"""A value that would print a line of its own if an error echoed it as it is."""
ECHO_LIMIT = 300
"""No error message that repeats a value from the request is longer than this."""


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    with running_nova(ollama_server, tmp_path_factory.mktemp("serve-input") / "home") as started:
        yield started


def openai_error(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code"}, body
    error: dict[str, object] = body["error"]
    return error


def detail(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail"} and isinstance(body["detail"], str), body
    return body["detail"]


def assert_cut_and_one_line(message: str) -> None:
    assert len(message) <= ECHO_LIMIT, message[:400]
    assert "…" in message, message
    assert "\n" not in message and "\r" not in message, message


DEEP = b"[" * 100_000 + b"]" * 100_000
"""Nested past what Python's JSON parser can follow (a RecursionError)."""
NESTED = b'{"format": "novaberg-memory-export", "x": ' + b"[" * 600 + b"]" * 600 + b"}"
"""Nested less deeply: parsed, but deeper than any export (and than a recursive walk)."""
LONG_NUMBER = b'{"format": "novaberg-memory-export", "schema_version": ' + b"7" * 5000 + b"}"
"""A number Python refuses to convert (more than 4300 digits)."""


def test_an_import_that_cannot_be_parsed_is_a_400_and_imports_nothing(nova: Nova) -> None:
    url = f"{nova.url}/api/memory/import"
    before = httpx.get(f"{nova.url}/api/memory/export", headers=nova.auth()).json()["memories"]
    for body in (DEEP, NESTED, LONG_NUMBER):
        response = httpx.post(url, content=body, headers=nova.auth(), timeout=60)
        said = detail(response, 400)
        assert "nothing was imported" in said, said
        assert len(said) <= ECHO_LIMIT, said
    deep = detail(httpx.post(url, content=DEEP, headers=nova.auth(), timeout=60), 400)
    assert "nested" in deep, deep
    after = httpx.get(f"{nova.url}/api/memory/export", headers=nova.auth()).json()["memories"]
    assert after == before


def test_a_body_that_cannot_be_parsed_is_invalid_request_on_v1_and_a_clear_400_on_api(
    nova: Nova,
) -> None:
    headers = {**nova.auth(), "Content-Type": "application/json"}
    not_utf8 = b'{"model": "nova\xff", "messages": [{"role": "user", "content": "hi"}]}'
    for body in (DEEP, not_utf8, b'{"model": ' + b"7" * 5000 + b"}"):
        response = httpx.post(f"{nova.url}/v1/chat/completions", content=body, headers=headers)
        error = openai_error(response, 400)
        assert error["code"] == "invalid_request", error
        assert error["type"] == "invalid_request_error", error
        assert "request body" in str(error["message"]), error
    deep = openai_error(
        httpx.post(f"{nova.url}/v1/chat/completions", content=DEEP, headers=headers), 400
    )
    assert "nested too deeply" in str(deep["message"]), deep
    on_api = httpx.post(f"{nova.url}/api/turns", content=DEEP, headers=headers)
    assert "nested too deeply" in detail(on_api, 400)


def test_a_long_or_multiline_model_name_is_echoed_cut_and_quoted(nova: Nova) -> None:
    with nova.client() as client:
        for model in ("m" * 500_000, "gpt" + FORGED + "x" * 100):
            with pytest.raises(openai.NotFoundError) as refused:
                client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "hi"}]
                )
            assert refused.value.code == "model_not_found"
            assert isinstance(refused.value.body, dict)
            assert_cut_and_one_line(str(refused.value.body["message"]))
        with pytest.raises(openai.NotFoundError) as short:
            client.chat.completions.create(
                model="gpt\n4o", messages=[{"role": "user", "content": "hi"}]
            )
    assert isinstance(short.value.body, dict)
    assert "'gpt\\n4o'" in str(short.value.body["message"])  # whole, as data


def test_values_echoed_by_api_errors_are_cut_and_stay_on_one_line(nova: Nova) -> None:
    auth = nova.auth()
    since = httpx.get(f"{nova.url}/api/stats", headers=auth, params={"since": "9" * 5000 + FORGED})
    assert_cut_and_one_line(detail(since, 400))
    key = "k" * 100_000 + FORGED
    field = httpx.post(f"{nova.url}/api/turns", headers=auth, json={"message": "hi", key: 1})
    assert_cut_and_one_line(detail(field, 422))
    huge = "9" * 4000
    for path in (f"/api/memory/{huge}", f"/api/turns/{huge}", f"/api/turns/{huge}/why"):
        assert_cut_and_one_line(detail(httpx.get(f"{nova.url}{path}", headers=auth), 404))


def test_a_malformed_key_is_a_401_that_says_what_is_wrong_with_it(nova: Nova) -> None:
    key = nova.keys["ada"]
    url = f"{nova.url}/v1/models"
    zero_width = b"Bearer " + key[:10].encode() + "\u200b".encode() + key[10:].encode()
    malformed: list[bytes] = [
        zero_width,
        f"Bearer {key[:-1]}".encode(),  # cut when copied
        f"Bearer {key} {key}".encode(),  # pasted twice
        f"Bearer {key[3:]}".encode(),  # without nb-
    ]
    for header in malformed:
        error = openai_error(httpx.get(url, headers={b"Authorization": header}), 401)
        assert error["code"] == "invalid_api_key", error
        assert str(error["message"]).startswith("The API key is malformed: "), error
        assert key[5:] not in str(error["message"])  # never the key itself
    assert "zero-width" in str(
        openai_error(httpx.get(url, headers={b"Authorization": zero_width}), 401)["message"]
    )
    on_api = httpx.get(f"{nova.url}/api/memory", headers={b"Authorization": zero_width})
    assert detail(on_api, 401).startswith("The API key is malformed: ")
    with (
        openai.OpenAI(base_url=f"{nova.url}/v1", api_key=key[:-1], max_retries=0) as cut,
        pytest.raises(openai.AuthenticationError) as refused,
    ):
        cut.models.list()
    assert "malformed" in refused.value.message and "characters" in refused.value.message
    basic = openai_error(httpx.get(url, headers={"Authorization": f"Basic {key}"}), 401)
    assert "Bearer" in str(basic["message"]) and "Missing" not in str(basic["message"])
    unknown = "nb-" + "A" * (len(key) - 3)  # well formed, never issued
    error = openai_error(httpx.get(url, headers={"Authorization": f"Bearer {unknown}"}), 401)
    assert error["message"] == "Invalid or revoked API key.", error
