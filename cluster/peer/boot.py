"""When a starting node may start its broker app: peer discovery and the full-cluster
restart rule, I/O-free apart from the small file that remembers the cluster.

A node's queues and records are only as fresh as the moment it stopped. RabbitMQ's
rule follows: the node that stopped last holds the newest state and starts at once;
a node that stopped while peers still ran waits for one of them to run again, and
gives up (the operator starts the right node first, or forces the boot) rather than
serve its stale copy. When every node it waited for is starting too (the whole
cluster crashed at once), they start together, except a node that one of them saw
stop: each node says in its hello whom its own file names (`outlived_by`), and a peer
whose file does not name us watched us go down and went on without us (it confirmed
what we never received), so we wait for it to run and take the queues from it. Were we
to start first, nobody would run yet to tell us otherwise, our stale copy would be the
cluster's, and the peers that hold the newer state would join it as empty mirrors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class BootError(RuntimeError):
    """The node may not start: it would serve state older than a peer's."""


class LastRunningFile:
    """The peers whose app ran when this node's app last ran, rewritten on change."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> frozenset[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return frozenset()
        except json.JSONDecodeError as error:
            raise BootError(f"{self.path}: not valid JSON: {error}") from error
        peers = data.get("running_peers") if isinstance(data, dict) else None
        if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
            raise BootError(f"{self.path}: expected {{\"running_peers\": [names]}}")
        return frozenset(peers)

    def save(self, peers: frozenset[str]) -> None:
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump({"running_peers": sorted(peers)}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)


@dataclass(frozen=True, slots=True)
class BootGate:
    configured: frozenset[str]
    last_running: frozenset[str]  # empty: this node stopped last, or never ran
    force: bool = False
    me: str = ""

    def discovered(self, reachable: set[str]) -> bool:
        """Every peer has said hello: we know which of them run."""
        return self.configured <= reachable

    def may_start(self, running: set[str], reachable: set[str],
                  outlived_by: Mapping[str, frozenset[str]] | None = None) -> bool:
        """A peer that outlived us runs again (its state is the newest), or all the
        peers that outlived us are here and starting as well, and none of them saw us
        stop. ``outlived_by`` has, for the peers whose hello said it, whom their own
        file names."""
        if self.force or not self.last_running:
            return True
        if self.last_running & running:
            return True
        if not self.last_running <= reachable:
            return False
        return not self.saw_us_stop(outlived_by or {})

    def saw_us_stop(self, outlived_by: Mapping[str, frozenset[str]]) -> list[str]:
        """The peers that outlived us and knew it: their file does not name us (they
        saw us go down and ran on). Their state is newer than ours for sure."""
        return sorted(peer for peer in self.last_running
                      if peer in outlived_by and self.me not in outlived_by[peer])

    def refusal(self, waited: float) -> str:
        names = ", ".join(sorted(self.last_running))
        return (f"this node stopped while {names} still ran and none of them ran again "
                f"within {waited:g}s, so its queues may be stale: start the node that "
                f"stopped last first, or pass --force-boot")
