"""Output as rabbitmqctl writes it: informational lines, then tab-separated tables or
JSON; `Ctl`, what every command runs with, holds the node's client and the output's
form."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cluster.mqctl.client import Client


def cell(value: Any) -> str:
    """One table cell, written the way rabbitmqctl writes values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list):
        return "[" + ", ".join(cell(item) for item in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@dataclass
class Ctl:
    client: Client
    quiet: bool
    formatter: str

    def info(self, message: str) -> None:
        if not self.quiet and self.formatter == "table":
            print(message)

    def rows(self, fields: list[str], rows: list[list[Any]]) -> None:
        if self.formatter == "json":
            print(json.dumps([dict(zip(fields, row, strict=True)) for row in rows]))
            return
        print("\t".join(fields))
        for row in rows:
            print("\t".join(cell(value) for value in row))

    def document(self, data: Any, text: list[str]) -> None:
        """A non-tabular answer: ``data`` as JSON, or the text lines."""
        if self.formatter == "json":
            print(json.dumps(data))
        else:
            print("\n".join(text))
