"""Partition handling as an I/O-free machine: what a node does about its failure
detector's events under its ``partition_handling`` (RabbitMQ's
``cluster_partition_handling``).

The node's shell feeds it every detector event, saying whether the app runs and takes
cluster input, and carries out the actions it returns in order: node events to emit,
app stops, starts and restarts, a peer's coming and going for the cluster layer, and
disconnections. It reads the detector it was given for whom we reach and with whom we
were partitioned; its own state is pause_minority's: whether it paused the app, and
whether it waits for the whole cluster after a partial partition.

* ``ignore``: the cluster layer hears of every peer as it comes and goes, except that
  a peer back from a partition is not merged: the two sides stay apart.
* ``pause_minority``: the app stops while this node reaches no more than half of the
  cluster, and after a partial partition until it reaches all of it; it starts again
  once the node reaches a majority (or the whole cluster). Reachability is assessed
  before the cluster layer hears of anything, so that a node about to pause never acts
  on the loss of its peers (confirms what only it holds, promotes its mirrors). A lost
  peer is told only once its loss is settled (`PeerLost`: no peer we see still hears
  it), and one back before that restarts the app, since what the two sent each other
  meanwhile may be lost.
* ``autoheal``: as ``ignore``, except that when a partition heals the smaller side
  (ties: the side without the first node by name) restarts, so that its mirrors rejoin
  the winners' empty; every node of both sides works the winner out alike.

``ignore`` and ``autoheal`` make a partial partition full by disconnecting from the peer
that still hears the lost one, as RabbitMQ's ``rabbit_node_monitor`` does: each side
then sees the other come back partitioned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cluster import events
from cluster.breakages import Breaks
from cluster.events import NodeEvent
from cluster.peer.detector import (
    AppStarted,
    AppStopped,
    Event,
    FailureDetector,
    PartialPartition,
    PeerDown,
    PeerEvent,
    PeerLost,
    PeerUp,
)

Handling = Literal["ignore", "pause_minority", "autoheal"]
HANDLINGS: tuple[Handling, ...] = ("ignore", "pause_minority", "autoheal")


@dataclass(frozen=True, slots=True)
class Emit:
    """Report a node event."""

    event: NodeEvent


@dataclass(frozen=True, slots=True)
class PauseApp:
    """Stop the app (pause_minority): the node is in a minority, or partially parted."""


@dataclass(frozen=True, slots=True)
class ResumeApp:
    """Start the app it paused: the node reaches enough of the cluster again."""


@dataclass(frozen=True, slots=True)
class RestartApp:
    """Stop the app and start it again, afresh: its side lost an autoheal, or a peer came
    back before its loss settled."""


@dataclass(frozen=True, slots=True)
class TellPeerUp:
    """For the cluster layer: ``peer``'s app runs as ``incarnation`` and is ours to
    share with."""

    peer: str
    incarnation: str


@dataclass(frozen=True, slots=True)
class TellPeerDown:
    """For the cluster layer: ``peer`` is gone (its queues' members with it)."""

    peer: str


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Take ``peer`` down although its link works, and ask it to do the same of us."""

    peer: str
    reason: str


Action = Emit | PauseApp | ResumeApp | RestartApp | TellPeerUp | TellPeerDown | Disconnect


class PartitionPolicy:
    def __init__(self, me: str, detector: FailureDetector, handling: Handling,
                 breaks: Breaks) -> None:
        """``breaks``: the planted bugs of partition handling (cluster.breakages)."""
        self.me = me
        self.detector = detector
        self.handling = handling
        self._breaks = breaks
        self.paused = False  # pause_minority stopped the app and has not started it
        # pause_minority after a partial partition: paused until every peer is back.
        self._awaiting_whole_cluster = False

    def handle(self, event: Event, app_takes_input: bool) -> list[Action]:
        """The actions for one detector event, given whether the app runs and takes
        cluster input (a stopping app takes none)."""
        if isinstance(event, PartialPartition):
            return self._partial_partition(event)
        if isinstance(event, PeerLost):
            return self._peer_lost(event, app_takes_input)
        actions = _reports(event)
        if self.handling == "pause_minority":
            actions += self._reassess()
        if app_takes_input and not self.paused:
            actions += self._tell_cluster(event)
        return actions

    def _partial_partition(self, event: PartialPartition) -> list[Action]:
        report = Emit(events.PartialPartition(lost=event.lost, via=event.via))
        if self.handling == "pause_minority":
            self._awaiting_whole_cluster = True
            return [report, *self._reassess()]
        return [report, Disconnect(event.via, f"partial partition: it still hears {event.lost}")]

    def _peer_lost(self, event: PeerLost, app_takes_input: bool) -> list[Action]:
        """pause_minority tells a lost peer only now: until no peer we see still hears
        it, the loss may be a partial partition that pauses this node."""
        if self.handling == "pause_minority" and app_takes_input and not self.paused:
            return [TellPeerDown(event.peer)]
        return []

    def _reassess(self) -> list[Action]:
        """pause_minority: pause or resume for the part of the cluster we reach now."""
        total = len(self.detector.peers) + 1
        reachable = len(self.detector.reachable()) + 1
        if reachable == total:
            self._awaiting_whole_cluster = False
        minority = reachable * 2 <= total
        pause = ((minority or self._awaiting_whole_cluster)
                 and not self._breaks.pause_minority_ignored)
        if pause and not self.paused:
            self.paused = True
            reason: Literal["minority", "partial partition"] = (
                "minority" if minority else "partial partition")
            return [Emit(events.Paused(reason=reason, reachable=reachable, nodes=total)),
                    PauseApp()]
        if not pause and self.paused and not self._breaks.pause_never_resumes:
            self.paused = False
            return [Emit(events.Resumed(reachable=reachable, nodes=total)), ResumeApp()]
        return []

    def _tell_cluster(self, event: PeerEvent) -> list[Action]:
        peer = event.peer
        if isinstance(event, PeerDown):
            # pause_minority: told once settled (`PeerLost`): it may be a partial partition
            return [] if self.handling == "pause_minority" else [TellPeerDown(peer)]
        if isinstance(event, AppStopped):
            return [TellPeerDown(peer)]
        if not self.detector.peers[peer].app_running:
            return []
        if (isinstance(event, PeerUp) and event.unsettled
                and self.handling == "pause_minority"):
            # Back before the loss was settled, so the cluster layer never heard of it,
            # yet what we sent each other meanwhile may be lost (a delivery, an ack, a
            # cancel). Restart, as for a partial partition: our peers drop what they
            # held for us, and we start afresh.
            return [Emit(events.Restart(reason="partition healed before its loss settled",
                                        peer=peer)), RestartApp()]
        if peer not in self.detector.partitions or self.handling == "pause_minority":
            return [TellPeerUp(peer, event.incarnation)]
        if (self.handling == "autoheal" and self._autoheal_loses()
                and not self._breaks.autoheal_no_restart):
            # The other side won: restart, so our mirrors rejoin theirs empty.
            winners = tuple(sorted(self.detector.partitions))
            return [Emit(events.Restart(reason="autoheal", winners=winners)), RestartApp()]
        return []  # the sides stay apart (ignore), or a loser will restart (autoheal)

    def _autoheal_loses(self) -> bool:
        """After a partition heals, the side with fewer nodes restarts (ties: the side
        without the first node by name)."""
        reachable = set(self.detector.reachable())
        other = self.detector.partitions & reachable
        mine = {self.me} | (reachable - other)
        loses = (len(mine) < len(other) if len(mine) != len(other)
                 else min(mine | other) not in mine)
        return loses != self._breaks.autoheal_wrong_winner


def _reports(event: PeerEvent) -> list[Action]:
    """The node events that report a peer's coming and going."""
    if isinstance(event, PeerUp):
        reports: list[NodeEvent] = [events.PeerUp(peer=event.peer, incarnation=event.incarnation,
                                                  restarted=event.restarted)]
        if event.healed:
            reports.append(events.PartitionHealed(peer=event.peer))
        if event.partition:
            reports.append(events.PartitionDetected(peer=event.peer))
    elif isinstance(event, PeerDown):
        reports = [events.PeerDown(peer=event.peer, reason=event.reason)]
    elif isinstance(event, AppStarted):
        reports = [events.PeerAppStarted(peer=event.peer)]
    else:
        reports = [events.PeerAppStopped(peer=event.peer)]
    return [Emit(report) for report in reports]
