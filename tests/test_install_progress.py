"""``make setup`` shows the llama.cpp build's progress instead of minutes of silence.

The Makefile runs pip through tools/install_progress.py; here it runs a stand-in command that
prints what ``pip install -v`` prints while building a wheel with CMake and Ninja.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "install_progress.py"

FAKE_PIP = """
import sys
print("Collecting llama-cpp-python==0.3.36")
print("Collecting numpy>=1.20.0")
print("Building wheel for llama-cpp-python (pyproject.toml): started")
print("  Running command Building wheel for llama-cpp-python (pyproject.toml)")
for step in range(1, 201):
    print(f"  [{step}/200] Building CXX object vendor/llama.cpp/src/CMakeFiles/llama.dir/x{step}.o")
print("Building wheel for llama-cpp-python (pyproject.toml): finished with status 'done'")
print("Successfully installed llama-cpp-python-0.3.36 numpy-2.3.1 novaberg-0.1.0")
sys.exit(int(sys.argv[1]))
"""


def run(tmp_path: Path, status: int) -> tuple[subprocess.CompletedProcess[str], Path]:
    log = tmp_path / "install.log"
    done = subprocess.run(
        [sys.executable, str(TOOL), str(log), "--", sys.executable, "-c", FAKE_PIP, str(status)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, log


def test_a_long_build_is_shown_in_a_few_lines_and_logged_whole(tmp_path: Path) -> None:
    done, log = run(tmp_path, 0)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "  downloading packages …"
    assert lines[1].startswith("  building llama-cpp-python (")
    steps = [line for line in lines if "compiled" in line]
    assert len(steps) == 11  # every 10%: 0%, 10%, …, 100%
    assert steps[-1].startswith("    compiled 200 of 200 steps (")
    assert lines[-1].startswith("  installed 3 packages in ")
    assert len(log.read_text().splitlines()) == 206  # everything pip said is in the log


def test_a_failed_install_exits_with_pips_status_and_shows_the_logs_tail(tmp_path: Path) -> None:
    done, log = run(tmp_path, 3)
    assert done.returncode == 3
    assert f"The install failed (exit 3); the last lines of {log}:" in done.stdout
    assert done.stdout.rstrip().endswith(
        "Successfully installed llama-cpp-python-0.3.36 numpy-2.3.1 novaberg-0.1.0"
    )


def test_the_makefile_installs_through_it_and_says_how_long_it_takes() -> None:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "setup", "VENV=/nonexistent/venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "about 8 minutes on 2 cores" in done.stdout
    assert "tools/install_progress.py /nonexistent/venv/install.log --" in done.stdout
    assert "pip install -v -e" in done.stdout and "--quiet -e" not in done.stdout
