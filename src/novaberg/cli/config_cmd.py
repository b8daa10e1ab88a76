"""``novaberg config``: the effective settings and where each came from."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from novaberg.cli.common import guarded, load


def _flat(settings: Any) -> dict[str, Any]:
    from novaberg.config import _flatten

    data = settings.model_dump(mode="json")
    if data.get("openai_key"):
        data["openai_key"] = "********"
    return _flatten(data)


def run_config(*, as_json: bool) -> None:
    loaded = guarded(load)
    values = _flat(loaded.settings)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    k: {"value": v, "origin": loaded.origins.get(k, "default")}
                    for k, v in values.items()
                }
            )
        )
        return
    table = Table(title=f"Novaberg settings (file: {loaded.settings.config_file})")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("from")
    for key, value in values.items():
        table.add_row(key, "" if value is None else str(value), loaded.origins.get(key, "default"))
    Console().print(table)
