"""Test helpers shipped to users: a real HTTP server speaking Ollama's protocol.

from novaberg.testing import OllamaTestServer, Reply

with OllamaTestServer() as server:
    server.script("responder", Reply(content="Hallo!"))
    ...  # point OLLAMA_HOST at server.url
"""

from novaberg.testing.ollama_server import (
    Match,
    ModelSpec,
    OllamaTestServer,
    RecordedRequest,
    Reply,
)
from novaberg.testing.searxng_server import SearxngTestServer

__all__ = [
    "Match",
    "ModelSpec",
    "OllamaTestServer",
    "RecordedRequest",
    "Reply",
    "SearxngTestServer",
]
