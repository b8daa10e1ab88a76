"""One source for what a setting means: the settings model's descriptions are what
``novaberg config``, ``novaberg config --help`` and the README's settings table show."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from novaberg.cli.config_cmd import (
    README_BEGIN,
    README_END,
    REGENERATE,
    markdown_table,
    readme_section,
    replace_readme_table,
)
from novaberg.config import Settings, _flatten, settings_reference
from tests.test_cli import run

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_has_a_description() -> None:
    reference = settings_reference()
    names = [s.name for s in reference]
    assert set(_flatten(Settings().model_dump())) <= set(names)  # nothing left out
    vague = [s.name for s in reference if len(s.description.split()) < 3]
    assert vague == [], f"settings without a real description: {vague}"


def test_the_readme_settings_table_is_generated_from_the_model() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert README_BEGIN in readme and README_END in readme
    start = readme.index(README_BEGIN)
    shown = readme[start : readme.index(README_END) + len(README_END)]
    assert shown == readme_section(), (
        f"The README's settings table differs from the settings model; regenerate it: {REGENERATE}"
    )


def test_the_generator_rewrites_only_the_table(tmp_path: Path) -> None:
    stale = f"# Title\n\n{README_BEGIN}x -->\n| old |\n{README_END}\n\nAfter.\n"
    file = tmp_path / "README.md"
    file.write_text(stale, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "novaberg.cli.config_cmd", "--readme", str(file)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "regenerated" in done.stdout
    assert file.read_text(encoding="utf-8") == (f"# Title\n\n{readme_section()}\n\nAfter.\n")
    assert replace_readme_table(file.read_text(encoding="utf-8")) == file.read_text("utf-8")
    with pytest.raises(ValueError, match="no generated settings table"):
        replace_readme_table("# no table")


def test_the_markdown_table_has_a_row_per_setting() -> None:
    rows = markdown_table().splitlines()[2:]
    assert len(rows) == len(settings_reference())
    timeouts = next(r for r in rows if r.startswith("| `timeouts.total_s`"))
    assert "`NOVABERG_TIMEOUTS__TOTAL_S`" in timeouts and "`600.0`" in timeouts


def test_config_help_and_config_show_each_setting_with_its_meaning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    reference = settings_reference()
    shown_help = run("config", "--help")
    assert shown_help.returncode == 0, shown_help.stderr
    for s in reference:
        assert f"{s.env}" in shown_help.stdout
        assert s.description[:40] in shown_help.stdout, s.name
    assert "[timeouts]" in shown_help.stdout  # the help is not read as markup
    table = run("config")
    assert table.returncode == 0, table.stderr
    total = next(s for s in reference if s.name == "timeouts.total_s")
    line = next(line for line in table.stdout.splitlines() if "timeouts.total_s" in line)
    assert total.description in line
    as_json = json.loads(run("config", "--json").stdout)
    assert as_json["timeouts.total_s"]["description"] == total.description
