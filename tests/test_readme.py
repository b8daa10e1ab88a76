"""The README's promises, executed: its two commands and its test-server example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def code_blocks(language: str = "") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def opening_commands() -> list[str]:
    first = re.search(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)
    assert first is not None and first.group(1) == "sh"
    assert README[: first.start()].strip() == "# Novaberg"  # nothing before the two commands
    return [line.split("#")[0].strip() for line in first.group(2).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands_and_ci_runs_the_second() -> None:
    assert opening_commands() == ["make chat", "make test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in ci.splitlines() if line.startswith("make")]
    # after the set-up steps, exactly the README's command; then only the slower real-client
    # step the README's "Developing" names
    assert "make test" in commands
    assert commands[commands.index("make test") + 1 :] in ([], ["make frontends"])
    assert all(c.startswith("make setup") for c in commands[: commands.index("make test")])
    assert "make frontends" in README


def test_readme_test_server_example_runs() -> None:
    example = next(block for block in code_blocks("python") if "OllamaTestServer" in block)
    exec(compile(example, "README.md", "exec"), {})


@pytest.mark.embedded
def test_first_command_starts_a_chat_on_the_embedded_model_without_ollama(
    isolated_env: Path,
) -> None:
    # isolated_env points OLLAMA_HOST at a closed port: nothing else is reachable.
    venv = Path(sys.prefix)
    done = subprocess.run(
        ["make", "--no-print-directory", "-s", "chat", f"VENV={venv}"],
        cwd=ROOT,
        input="Hello Nova!\n/exit\n",
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "not reachable" in done.stderr and "embedded" in done.stderr
    assert "Nova on embedded/SmolLM2-135M-Instruct.Q4_1" in done.stdout
    reply = done.stdout.split("Nova ›", 1)[1].strip()
    assert reply  # the embedded model answered
