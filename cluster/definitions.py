"""The node's durable metadata file (users, vhosts, permissions, durable exchanges,
queues and bindings, policies), replaced atomically on every change."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cluster.amqp import tablejson


class DefinitionsError(ValueError):
    """The definitions file exists but cannot be used; names the file and the cause."""


class DefinitionsFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = tablejson.loads(text)
        except ValueError as error:
            raise DefinitionsError(f"{self.path}: not valid JSON: {error}") from error
        if not isinstance(data, dict):
            raise DefinitionsError(f"{self.path}: expected a JSON object")
        return data

    def save(self, definitions: dict[str, Any]) -> None:
        """Write to a temporary file, fsync, rename, fsync the directory: a crash leaves
        either the old or the new file, never a torn one."""
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(tablejson.dumps(definitions))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
