"""Failure and partition detection, I/O-free.

A peer is *linked* while its link to us is open and we have heard from it within
``tick * count`` seconds (heartbeats go out every tick; any bytes count, part of a frame
too, as a busy node may take seconds to read a large one). Every hello and heartbeat says
which peers its sender hears, and a peer is *up* only while it is linked and hears us:
a link cut one way takes the pair apart on both sides, as a dropped Erlang distribution
connection does. A peer that comes back up with the incarnation it had when it went
down never restarted: we were partitioned from it (or it was paused), as RabbitMQ
concludes when a node it saw go down reappears without having restarted.

When a peer goes down we ask the peers still up whether they hear it. Each asked peer
checks that it is alive *now*: it sends it a probe and answers yes on its reply (it
does), or no once it loses it (it does not). Its messages prove nothing: a busy node
reads what a peer sent before it died long after, and taking that for life split a
cluster in two on a kill of the master (RabbitMQ, too, checks the node live before
declaring a partial partition). The reply travels on the link behind everything the
peer sent before, so it cannot be overtaken by stale news. A peer down to us yet
up to one we see is a *partial* partition, which the node's partition handling turns
into a pause or a full partition (RabbitMQ's ``rabbit_node_monitor`` does the same);
once every answer is no, or a failure-detection window has passed, the loss is
settled (`PeerLost`). A peer back before that was cut off from us for a moment
(`PeerUp.unsettled`: what we sent each other meanwhile may be lost); one back with a new
incarnation settles its old one's loss at once.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PeerUp:
    """``partition``: it comes back with the incarnation it went down with. ``unsettled``:
    it comes back so before its loss was settled (no `PeerLost`): what we and it sent
    each other meanwhile may be gone, and a node that acts on a loss only once settled
    (pause_minority) has told its cluster layer nothing."""

    peer: str
    incarnation: str
    restarted: bool
    partition: bool
    unsettled: bool = False
    healed: bool = False  # it restarted while we counted a partition with it: that is over


@dataclass(frozen=True, slots=True)
class PeerDown:
    peer: str
    reason: str


@dataclass(frozen=True, slots=True)
class AppStopped:
    """The peer is up but its broker app stopped (``stop_app``): its queues are gone
    until the app starts again, with a new incarnation."""

    peer: str


@dataclass(frozen=True, slots=True)
class AppStarted:
    """The peer's broker app started in the incarnation it said hello with (its first
    app start: the process links up with its peers before its app runs)."""

    peer: str
    incarnation: str


@dataclass(frozen=True, slots=True)
class PartialPartition:
    """``lost`` is down to us while ``via``, which we see, still hears it."""

    lost: str
    via: str


@dataclass(frozen=True, slots=True)
class PeerLost:
    """No peer we asked about a lost ``peer`` hears it: not a partial partition."""

    peer: str


@dataclass(frozen=True, slots=True)
class Ask:
    """For the links to send: ask ``to`` whether it still hears ``about``."""

    to: str
    about: str


@dataclass(frozen=True, slots=True)
class Probe:
    """For the links to send: ask ``to`` to reply at once (`FailureDetector.replied`)."""

    to: str
    seq: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """For the links to send: our status (whom we hear) to ``to`` now, ahead of
    anything that follows it on the link."""

    to: str


@dataclass(frozen=True, slots=True)
class Answer:
    """For the links to send: tell ``to`` whether we still hear ``about``."""

    to: str
    about: str
    hears: bool


PeerEvent = PeerUp | PeerDown | AppStopped | AppStarted
Event = PeerEvent | PartialPartition | PeerLost
Output = Event | Heartbeat | Ask | Answer | Probe


@dataclass(slots=True)
class PeerState:
    up: bool = False
    incarnation: str | None = None  # the one it had when last up
    app_running: bool = False
    last_heard: float = 0.0
    linked: bool = False
    # What its hello and heartbeats say its last-running file names (the peers that
    # outlived it when it last stopped), if they say it.
    outlived_by: frozenset[str] | None = None


class FailureDetector:
    def __init__(self, me: str, peers: list[str], tick: float, count: int,
                 stale_proof_of_life: bool = False) -> None:
        """``stale_proof_of_life``: the planted bug of that name (cluster.breakages)."""
        self.me = me
        self._stale_proof_of_life = stale_proof_of_life
        self.timeout = tick * count
        self.peers = {name: PeerState() for name in peers}
        self.partitions: set[str] = set()
        # Peers down to us -> (the peers yet to say whether they hear it, deadline).
        self._unsettled: dict[str, tuple[set[str], float]] = {}
        # (asker, peer it lost, our probe of that peer): answered yes when the peer
        # replies to that probe (or a later one), no when we lose the peer.
        self._questions: list[tuple[str, str, int]] = []
        self._probes = 0

    def heard(self, peer: str, incarnation: str, app_running: bool, hears: Collection[str],
              now: float, outlived_by: Collection[str] | None = None) -> list[Output]:
        """A hello or heartbeat: the peer's incarnation, app state and whom it hears
        (and whom its last-running file names, for a starting node's `BootGate`)."""
        state = self.peers[peer]
        if outlived_by is not None:
            state.outlived_by = frozenset(outlived_by)
        hears_us = self.me in hears
        outputs: list[Output] = []
        if state.up and state.incarnation != incarnation:
            outputs += self._down(peer, "restarted", now)
        elif state.up and not hears_us:
            outputs += self._down(peer, "it no longer hears us", now)
        newly_linked, coming_up = not state.linked, hears_us and not state.up
        state.linked, state.last_heard = True, now
        if newly_linked or coming_up:
            # Tell the peer we hear it without waiting for a tick, and before the node
            # hears it is up: the peer drops messages from us until it knows, so what
            # the node sends it then (its metadata snapshot) would be lost for good.
            outputs.append(Heartbeat(peer))
        if state.up:
            outputs += self._app_state(peer, app_running)
        else:
            state.app_running = app_running
            if coming_up:
                outputs += self._up(peer, incarnation)
        return outputs

    def message(self, peer: str, now: float) -> None:
        """Bytes from the peer, whole messages or part of one: its link is alive."""
        self.peers[peer].last_heard = now

    def _up(self, peer: str, incarnation: str) -> list[Output]:
        state = self.peers[peer]
        restarted = state.incarnation is not None and state.incarnation != incarnation
        partition = state.incarnation == incarnation
        state.up, state.incarnation = True, incarnation
        unsettled = self._unsettled.pop(peer, None) is not None  # back before the answers
        outputs: list[Output] = []
        healed = restarted and peer in self.partitions
        if restarted:
            self.partitions.discard(peer)
            if unsettled:  # the incarnation we lost is gone for good: settled
                outputs.append(PeerLost(peer))
        if partition:
            self.partitions.add(peer)
        return [*outputs, PeerUp(peer, incarnation, restarted, partition,
                                 unsettled and partition, healed)]

    def _app_state(self, peer: str, app_running: bool) -> list[Output]:
        state = self.peers[peer]
        was_running, state.app_running = state.app_running, app_running
        if was_running and not app_running:
            return [AppStopped(peer)]
        if app_running and not was_running:
            return [AppStarted(peer, state.incarnation or "")]
        return []

    def link_closed(self, peer: str, now: float) -> list[Output]:
        self.peers[peer].linked = False
        return self._down(peer, "connection closed", now)

    def tick(self, now: float) -> list[Output]:
        outputs: list[Output] = []
        for name, state in self.peers.items():
            if state.linked and now - state.last_heard > self.timeout:
                state.linked = False
                outputs += self._down(name, f"no heartbeat for {self.timeout:g}s", now)
        for lost, (_, deadline) in list(self._unsettled.items()):
            if deadline < now:
                del self._unsettled[lost]
                outputs.append(PeerLost(lost))
        return outputs

    def disconnect(self, peer: str, reason: str, now: float) -> list[Output]:
        """Take the peer down although its link works: it comes back up (partitioned
        from us) with its next heartbeat."""
        return self._down(peer, reason, now)

    def _down(self, peer: str, reason: str, now: float) -> list[Output]:
        state = self.peers[peer]
        if not state.up:
            return []
        serving = state.app_running
        state.up = False
        state.app_running = False
        outputs: list[Output] = [PeerDown(peer, reason)]
        outputs += [Answer(asker, peer, False) for asker, about, _ in self._questions
                    if about == peer]
        self._questions = [q for q in self._questions if peer not in (q[0], q[1])]
        for lost, (waiting, _) in list(self._unsettled.items()):
            if peer in waiting:  # it cannot answer now
                waiting.discard(peer)
                outputs += self._settle_if_answered(lost)
        if reason == "restarted" or not serving:
            # A restart is no partition; nor is the loss of a peer whose app had stopped
            # (a graceful stop says so before its links close, a paused node is
            # stopped): it serves nothing a partition could split. Nothing to ask.
            outputs.append(PeerLost(peer))
            return outputs
        asking = set(self.reachable())
        self._unsettled[peer] = (asking, now + self.timeout)
        outputs += [Ask(name, peer) for name in sorted(asking)]
        return outputs + self._settle_if_answered(peer)

    def _settle_if_answered(self, lost: str) -> list[Output]:
        """`PeerLost` once no peer we asked about ``lost`` is left to answer."""
        if self._unsettled[lost][0]:
            return []
        del self._unsettled[lost]
        return [PeerLost(lost)]

    # -- partial partitions -------------------------------------------------------------

    def asked(self, asker: str, about: str) -> list[Output]:
        """``asker`` lost ``about``: we probe ``about`` and answer when it replies or
        when we lose it."""
        if not self.peers[asker].up:
            return []
        if about in self.peers and self.peers[about].up:
            if self._stale_proof_of_life:
                return [Answer(asker, about, True)]
            self._probes += 1
            self._questions.append((asker, about, self._probes))
            return [Probe(about, self._probes)]
        return [Answer(asker, about, False)]

    def replied(self, peer: str, seq: int) -> list[Output]:
        """``peer`` replied to our probe ``seq``: it was alive after every question
        about it that we probed it for up to then."""
        if not self.peers[peer].up:
            return []
        answered = [q for q in self._questions if q[1] == peer and q[2] <= seq]
        self._questions = [q for q in self._questions if q not in answered]
        return [Answer(asker, peer, True) for asker, _, _ in answered]

    def answered(self, via: str, about: str, hears: bool) -> list[Output]:
        unsettled = self._unsettled.get(about)
        if unsettled is None or via not in unsettled[0]:
            return []
        if hears:
            del self._unsettled[about]
            return [PartialPartition(about, via)]
        unsettled[0].discard(via)
        return self._settle_if_answered(about)

    # -- views --------------------------------------------------------------------------

    def hears(self) -> list[str]:
        """Peers we hear: what our hello and heartbeats say."""
        return sorted(n for n, s in self.peers.items() if s.linked)

    def running(self) -> list[str]:
        """Peers that are up with their broker app running."""
        return sorted(n for n, s in self.peers.items() if s.up and s.app_running)

    def reachable(self) -> list[str]:
        return sorted(n for n, s in self.peers.items() if s.up)

    def outlived_by(self) -> dict[str, frozenset[str]]:
        """Per peer that said it: the peers its last-running file names."""
        return {n: s.outlived_by for n, s in self.peers.items() if s.outlived_by is not None}
