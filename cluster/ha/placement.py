"""Where a queue's replicas go, as pure functions of its policy, its record and the
running nodes: which nodes hold mirrors (`wanted_mirror_nodes`), the view a master
makes of that (`place`), who takes over when members die (`succession`) and when a
policy forbids the promotion (`promotion_refused`).

The coordinator applies what they return (writes the record, emits the events, starts
syncs); nothing here changes anything.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cluster.gm import View
from cluster.ha.record import Member, QueueRecord, node_of, unused_member

Definition = Mapping[str, Any]  # a policy's definition: its ``ha-*`` keys


def wanted_mirror_nodes(definition: Definition, master: str, current: list[str],
                        running: list[str]) -> list[str]:
    """Nodes that should hold mirrors under a policy's ``ha-*`` keys, keeping the
    current mirrors where they fit. ``running`` is in cluster order."""
    mode = definition.get("ha-mode")
    others = [n for n in running if n != master]
    if mode == "all":
        return others
    if mode == "exactly":
        count = int(definition["ha-params"]) - 1
        kept = [n for n in current if n in others]
        spare = [n for n in others if n not in kept]
        return (kept + spare)[:max(count, 0)]
    if mode == "nodes":
        listed = [str(n) for n in definition["ha-params"]]
        return [n for n in others if n in listed]
    return []


def master_fits(definition: Definition, node: str) -> bool:
    """Whether a policy lets ``node`` hold the master (``ha-mode: nodes`` names the
    nodes for every replica)."""
    if definition.get("ha-mode") != "nodes":
        return True
    return node in [str(n) for n in definition["ha-params"]]


@dataclass(frozen=True)
class Placement:
    """The view a master makes its record's: mirrors ``added`` (empty, unsynchronised)
    and ``dropped`` (the master itself among them when it hands over)."""

    view: View
    added: tuple[Member, ...] = ()
    dropped: tuple[Member, ...] = ()


def place(definition: Definition, record: QueueRecord, running: Mapping[str, str], *,
          keep_unwanted: bool = False, unsynced_handover: bool = False) -> Placement:
    """What the master of ``record`` makes of its view, with the peers in ``running``
    (node -> incarnation) up: mirrors are added and dropped as the policy says; when the
    policy no longer wants the master's node it hands over, but only to a synchronised
    mirror, which must be left the eldest. ``keep_unwanted`` and ``unsynced_handover``
    are the planted bugs keeps-unwanted-mirrors and unsynced-handover."""
    master = node_of(record.master)
    current = [node_of(m) for m in record.mirrors]
    wanted = wanted_mirror_nodes(definition, master, current, sorted([master, *running]))
    view = record.view
    added = []
    for node in wanted:
        if node not in current and node in running:
            member = unused_member(view, node, running[node])
            view = view.joined(member)
            added.append(member)
    dropped = [] if keep_unwanted else [m for m in record.mirrors if node_of(m) not in wanted]
    successor = next((m for m in view.members[1:] if node_of(m) in wanted and (
        m in record.synced or unsynced_handover)), None)
    if not master_fits(definition, master) and successor is not None:
        dropped = [m for m in view.members[1:] if m != successor
                   and (node_of(m) not in wanted
                        or view.members.index(m) < view.members.index(successor))]
        dropped.append(record.master)
    if dropped:
        view = view.without(*dropped)
    return Placement(view, tuple(added), tuple(dropped))


@dataclass(frozen=True)
class Succession:
    """After members died: the eldest survivor (``acting``) writes ``view``, without
    the ``dead``; if the master died, ``acting`` is the new master."""

    acting: Member
    dead: tuple[Member, ...]
    master_died: bool
    view: View


def succession(record: QueueRecord, up: Collection[str], *,
               youngest: bool = False) -> Succession | None:
    """Who acts for ``record`` with only the nodes in ``up`` running: every member on a
    node that is down is dead, not only the latest loss's, so that when two die at once
    the eldest survivor looks past both. None when nobody died or nobody survived.
    ``youngest`` is the planted bug youngest-promoted."""
    dead = tuple(m for m in record.view.members if node_of(m) not in up)
    alive = [m for m in record.view.members if m not in dead]
    if not dead or not alive:
        return None
    master_died = record.master in dead
    youngest = master_died and youngest
    acting = alive[-1] if youngest else alive[0]
    view = record.view.without(*dead)
    if youngest:
        view = replace(view, members=(acting, *[m for m in view.members if m != acting]))
    return Succession(acting, dead, master_died, view)


def promotion_refused(definition: Definition, record: QueueRecord, member: Member, *,
                      graceful: bool, ignore: bool = False) -> str | None:
    """The setting that forbids promoting ``member`` now that the master died (stopped
    gracefully, or not): ``ha-promote-on-shutdown`` (default ``when-synced``) or
    ``-on-failure`` (default ``always``), when it is ``when-synced`` and ``member`` is
    not synchronised. None: it is promoted. ``ignore`` is the planted bugs
    shutdown-promotes-unsynced and failure-promotes-unsynced."""
    key = "ha-promote-on-shutdown" if graceful else "ha-promote-on-failure"
    default = "when-synced" if graceful else "always"
    if definition.get(key, default) == "when-synced" and member not in record.synced \
            and not ignore:
        return key
    return None
