"""``current_time``: the date and time now, in the machine's time zone."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from novaberg.tools.registry import ToolEnv


def current_time(arguments: BaseModel, env: ToolEnv) -> str:
    now = datetime.now().astimezone()
    return now.strftime("%A, %Y-%m-%d %H:%M %Z")
