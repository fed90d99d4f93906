"""One node's replica of the cluster metadata, I/O-free.

Records (vhosts, users, permissions, policies, exchanges, bindings, queues) are keyed
by a tuple such as ``("queue", vhost, name)``. Every write carries a version
``(clock, node)`` from a Lamport clock; a replica keeps, per key, the write with the
highest version, deletions included (as tombstones), so replicas that have seen the
same writes hold the same records whatever the order they saw them in. Each record has
one writer at a time by design (its declaring node, a queue's master, a promoted
mirror), so last-writer-wins only arbitrates the rare concurrent writes, e.g. after
a partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

Key = tuple[str, ...]


@dataclass(frozen=True, order=True, slots=True)
class Version:
    clock: int
    node: str


@dataclass(frozen=True, slots=True)
class Update:
    """A write: ``value`` None deletes the record."""

    key: Key
    value: dict[str, Any] | None
    version: Version

    def to_json(self) -> dict[str, Any]:
        return {"key": list(self.key), "value": self.value,
                "version": [self.version.clock, self.version.node]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Update:
        clock, node = data["version"]
        return cls(tuple(data["key"]), data["value"], Version(int(clock), str(node)))


class Replica:
    def __init__(self, node: str, *, tombstones: bool = True) -> None:
        """``tombstones`` False is the planted bug ``forget-deletions``: a deleted record
        is dropped, so any older write of it that arrives later brings it back."""
        self.node = node
        self.clock = 0
        self.tombstones = tombstones
        self._records: dict[Key, Update] = {}

    def get(self, key: Key) -> dict[str, Any] | None:
        update = self._records.get(key)
        return None if update is None else update.value

    def items(self, kind: str) -> Iterator[tuple[Key, dict[str, Any]]]:
        """Live records of one kind, e.g. every ``"queue"``."""
        for key, update in self._records.items():
            if key[0] == kind and update.value is not None:
                yield key, update.value

    def put(self, key: Key, value: dict[str, Any]) -> Update:
        return self._write(key, dict(value))

    def delete(self, key: Key) -> Update:
        return self._write(key, None)

    def put_provisional(self, key: Key, value: dict[str, Any], place: int = 0) -> Update:
        """What this replica believes until it hears otherwise: any other replica's
        real write to the key wins over it. Provisional writes of the key by several
        replicas rank by ``place`` (0 first), as clock ``-place``, below every real write."""
        update = Update(key, dict(value), Version(-place, self.node))
        self._records[key] = update
        return update

    def is_provisional(self, key: Key) -> bool:
        update = self._records.get(key)
        return (update is not None and update.version.node == self.node
                and update.version.clock <= 0)

    def _write(self, key: Key, value: dict[str, Any] | None) -> Update:
        self.clock += 1
        update = Update(key, value, Version(self.clock, self.node))
        self._keep(update)
        return update

    def _keep(self, update: Update) -> None:
        if update.value is None and not self.tombstones:
            self._records.pop(update.key, None)
        else:
            self._records[update.key] = update

    def apply(self, update: Update) -> bool:
        """A write from another replica; True when it changed this one."""
        self.clock = max(self.clock, update.version.clock)
        current = self._records.get(update.key)
        if current is not None and current.version >= update.version:
            return False
        if current is None and update.value is None and not self.tombstones:
            return False
        self._keep(update)
        return True

    def merge(self, updates: Iterable[Update]) -> list[Update]:
        """Apply another replica's snapshot; returns the writes that changed this one."""
        return [update for update in updates if self.apply(update)]

    def snapshot(self) -> list[Update]:
        return list(self._records.values())
