"""A queue's cluster-wide record: its GM view (master first, mirrors in join order)
and which mirrors are synchronised."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from cluster.gm import View
from cluster.meta.replica import Key

# "<node>/<incarnation>": a node's replica of a queue during one app run; after a policy
# dropped it and took it back in that run, "<node>/<incarnation>#<n>", as a GM member id
# is never reused (a dead member stays its heir's alias).
Member = str


def member_id(node: str, incarnation: str) -> Member:
    return f"{node}/{incarnation}"


def node_of(member: Member) -> str:
    return member.rpartition("/")[0]


def incarnation_of(member: Member) -> str:
    return member.rpartition("/")[2].partition("#")[0]


def unused_member(view: View, node: str, incarnation: str) -> Member:
    """The member id for the node's run to join ``view`` with: its plain id, or the next
    one not yet used if the view holds that as a dead member's alias."""
    member, n = member_id(node, incarnation), 1
    while member in view or member in view.heirs:
        n += 1
        member = f"{member_id(node, incarnation)}#{n}"
    return member


def queue_key(vhost: str, name: str) -> Key:
    return ("queue", vhost, name)


@dataclass(frozen=True)
class QueueRecord:
    vhost: str
    name: str
    durable: bool
    auto_delete: bool
    arguments: dict[str, Any]
    view: View
    synced: tuple[Member, ...] = field(default=())
    # Which declaration of the name this is: a queue deleted and declared again is a new
    # GM group, and messages for the old one must not reach the new one.
    uid: str = ""

    @property
    def key(self) -> Key:
        return queue_key(self.vhost, self.name)

    @property
    def master(self) -> Member:
        return self.view.members[0]

    @property
    def mirrors(self) -> tuple[Member, ...]:
        return self.view.members[1:]

    def nodes(self) -> list[str]:
        return [node_of(m) for m in self.view.members]

    def succession(self) -> list[str]:
        """Nodes in the order their copies are trusted after a crash of the whole
        cluster: the master's, then the synchronised mirrors', then the rest's (partial)."""
        synced = [m for m in self.mirrors if m in self.synced]
        partial = [m for m in self.mirrors if m not in self.synced]
        return [node_of(m) for m in (self.master, *synced, *partial)]

    def with_view(self, view: View) -> QueueRecord:
        return replace(self, view=view, synced=tuple(m for m in self.synced if m in view))

    def to_json(self) -> dict[str, Any]:
        return {
            "durable": self.durable, "auto_delete": self.auto_delete,
            "arguments": self.arguments, "synced": list(self.synced), "uid": self.uid,
            "view": {"version": self.view.version, "members": list(self.view.members),
                     "aliases": [list(a) for a in self.view.aliases]},
        }

    @classmethod
    def from_json(cls, key: Key, value: dict[str, Any]) -> QueueRecord:
        view = value["view"]
        return cls(key[1], key[2], value["durable"], value["auto_delete"], value["arguments"],
                   View(view["version"], tuple(view["members"]),
                        tuple((dead, heir) for dead, heir in view["aliases"])),
                   tuple(value["synced"]), value["uid"])

