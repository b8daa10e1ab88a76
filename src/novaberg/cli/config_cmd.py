"""``novaberg config``: the effective settings, where each came from and what each means.

The descriptions come from the settings model (:func:`novaberg.config.settings_reference`),
the one source of this table, of ``novaberg config --help`` and of the README's settings
table, which ``python -m novaberg.cli.config_cmd --readme README.md`` regenerates.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from novaberg.cli.common import guarded, load
from novaberg.cli.safe import SafeConsole, dumps

if TYPE_CHECKING:
    from novaberg.config import SettingInfo

README_BEGIN = "<!-- settings table: generated from src/novaberg/config.py by "
README_END = "<!-- end of the generated settings table -->"
REGENERATE = "python -m novaberg.cli.config_cmd --readme README.md"


URL_SETTINGS = ("ollama_host", "openai_url", "searxng_url")


def _flat(settings: Any) -> dict[str, Any]:
    from novaberg.config import _flatten
    from novaberg.redaction import safe_url

    data = settings.model_dump(mode="json")
    if data.get("openai_key"):
        data["openai_key"] = "********"
    for name in URL_SETTINGS:  # a password in a server's URL is not shown either
        if data.get(name):
            data[name] = safe_url(data[name])
    data["ollama_hosts"] = [safe_url(url) for url in data.get("ollama_hosts") or []]
    return _flatten(data)


def _descriptions() -> dict[str, str]:
    from novaberg.config import settings_reference

    return {s.name: s.description for s in settings_reference()}


def describe(key: str, descriptions: dict[str, str]) -> str:
    """The description of a dotted setting; a key inside a table (``tribunal.custom.x.focus``)
    gets its table's."""
    while key:
        if key in descriptions:
            return descriptions[key]
        key = key.rpartition(".")[0]
    return ""


def run_config(*, as_json: bool) -> None:
    loaded = guarded(load)
    values = _flat(loaded.settings)
    descriptions = _descriptions()
    if as_json:
        typer.echo(
            dumps(
                {
                    k: {
                        "value": v,
                        "origin": loaded.origins.get(k, "default"),
                        "description": describe(k, descriptions),
                    }
                    for k, v in values.items()
                }
            )
        )
        return
    table = Table(title=f"Novaberg settings (file: {loaded.settings.config_file})")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("from")
    table.add_column("meaning")
    for key, value in values.items():
        table.add_row(
            key,
            "" if value is None else str(value),
            loaded.origins.get(key, "default"),
            describe(key, descriptions),
        )
    SafeConsole().print(table)


# -- the settings reference, for --help and the README ------------------------------------
def help_text() -> str:
    """``novaberg config --help``: what the command does and every setting, from the model."""
    from rich.markup import escape

    from novaberg.config import settings_reference

    lines = [
        "Show the effective settings, where each came from (env, config file, default) and "
        "what each means.",
        "",
        "Environment variables win over $NOVABERG_HOME/config.toml, which wins over the "
        "defaults. In the file the same names are lower-case keys, nested ones as tables "
        "([timeouts] total_s = 300); in the environment nested ones use __ "
        "(NOVABERG_TIMEOUTS__TOTAL_S=300).",
    ]
    section = None
    for s in settings_reference():
        table = s.name.rpartition(".")[0]
        if table != section:  # a paragraph per table of the file
            section = table
            lines.append("")
        default = f" (default {s.default})" if s.default else ""
        accepts = f" [{s.accepts}]" if s.accepts else ""
        lines.append(f"{s.env}{default}{accepts}: {s.description}")
    return escape("\n".join(lines))


def markdown_table(reference: list[SettingInfo] | None = None) -> str:
    """The README's settings table."""
    from novaberg.config import settings_reference

    rows = [
        "| setting (`config.toml`) | environment variable | meaning | accepts | default |",
        "|---|---|---|---|---|",
    ]
    for s in reference if reference is not None else settings_reference():
        cells = [
            f"`{s.name}`",
            f"`{s.env}`",
            s.description.replace("|", "\\|"),
            s.accepts.replace("|", "\\|"),
            f"`{s.default}`" if s.default else "—",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def readme_section() -> str:
    return f"{README_BEGIN}`{REGENERATE}` -->\n{markdown_table()}{README_END}"


def replace_readme_table(readme: str) -> str:
    """``readme`` with its generated settings table replaced by the current one."""
    start = readme.find(README_BEGIN)
    end = readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no generated settings table ({README_BEGIN!r} …)")
    return readme[:start] + readme_section() + readme[end + len(README_END) :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m novaberg.cli.config_cmd",
        description="The settings reference, generated from the settings model.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="print the README's table")
    group.add_argument("--readme", type=Path, help="rewrite the table in this README file")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown_table())
        return 0
    path: Path = args.readme
    path.write_text(replace_readme_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"{path}: settings table regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
