"""Policies: named, per-vhost, matched to queues by regex and priority."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

HA_MODES = ("all", "exactly", "nodes")


class PolicyError(ValueError):
    """A policy definition the broker refuses; the message names the key at fault."""


def _check_mode_params(definition: dict[str, Any]) -> None:
    mode = definition.get("ha-mode")
    params = definition.get("ha-params")
    if mode is None:
        if params is not None:
            raise PolicyError("ha-params given without ha-mode")
        return
    if mode not in HA_MODES:
        raise PolicyError(f"ha-mode must be one of {', '.join(HA_MODES)}, got {mode!r}")
    if mode == "all" and params is not None:
        raise PolicyError("ha-params must not be given with ha-mode 'all'")
    if mode == "exactly" and (not isinstance(params, int) or isinstance(params, bool)
                              or params < 1):
        raise PolicyError(f"ha-params for ha-mode 'exactly' must be a positive integer, "
                          f"got {params!r}")
    if mode == "nodes" and (not isinstance(params, list) or not params
                            or not all(isinstance(n, str) for n in params)):
        raise PolicyError(f"ha-params for ha-mode 'nodes' must be a list of node names, "
                          f"got {params!r}")


_CHOICES = {
    "ha-sync-mode": ("manual", "automatic"),
    "ha-promote-on-shutdown": ("when-synced", "always"),
    "ha-promote-on-failure": ("always", "when-synced"),
}


def validate_definition(definition: Any) -> dict[str, Any]:
    if not isinstance(definition, dict) or not definition:
        raise PolicyError("definition must be a non-empty JSON object")
    known = {"ha-mode", "ha-params", "ha-sync-batch-size", *_CHOICES}
    unknown = sorted(set(definition) - known)
    if unknown:
        raise PolicyError(f"unknown policy key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    _check_mode_params(definition)
    for key, choices in _CHOICES.items():
        if key in definition and definition[key] not in choices:
            raise PolicyError(f"{key} must be one of {', '.join(choices)}, "
                              f"got {definition[key]!r}")
    batch = definition.get("ha-sync-batch-size")
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise PolicyError(f"ha-sync-batch-size must be a positive integer, got {batch!r}")
    return dict(definition)


@dataclass(frozen=True)
class Policy:
    vhost: str
    name: str
    pattern: str
    definition: dict[str, Any]
    priority: int = 0
    apply_to: str = "all"

    @classmethod
    def create(
        cls, vhost: str, name: str, pattern: str, definition: Any, priority: int = 0,
        apply_to: str = "all",
    ) -> Policy:
        try:
            re.compile(pattern)
        except re.error as error:
            raise PolicyError(f"pattern {pattern!r} is not a valid regex: {error}") from error
        if apply_to not in ("all", "queues", "exchanges"):
            raise PolicyError(f"apply-to must be all, queues or exchanges, got {apply_to!r}")
        return cls(vhost, name, pattern, validate_definition(definition), int(priority), apply_to)

    def applies_to_queue(self, vhost: str, queue: str) -> bool:
        return (
            self.vhost == vhost
            and self.apply_to in ("all", "queues")
            and re.search(self.pattern, queue) is not None
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "vhost": self.vhost,
            "name": self.name,
            "pattern": self.pattern,
            "apply-to": self.apply_to,
            "definition": self.definition,
            "priority": self.priority,
        }


def effective_policy(policies: list[Policy], vhost: str, queue: str) -> Policy | None:
    """The matching policy with the highest priority (ties: the name that sorts last,
    as RabbitMQ picks a deterministic winner)."""
    matching = [p for p in policies if p.applies_to_queue(vhost, queue)]
    if not matching:
        return None
    return max(matching, key=lambda p: (p.priority, p.name))
