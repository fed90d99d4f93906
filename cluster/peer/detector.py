"""Failure and partition detection, I/O-free.

A peer is *up* while its link to us is open and we have heard from it within
``tick * count`` seconds (heartbeats go out every tick). A peer that comes back up
with the incarnation it had when it went down never restarted: we were partitioned
from it (or it was paused), as RabbitMQ concludes when a node it saw go down
reappears without having restarted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PeerUp:
    peer: str
    incarnation: str
    restarted: bool
    partition: bool


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


Event = PeerUp | PeerDown | AppStopped | AppStarted


@dataclass(slots=True)
class PeerState:
    up: bool = False
    incarnation: str | None = None
    app_running: bool = False
    last_heard: float = 0.0


class FailureDetector:
    def __init__(self, peers: list[str], tick: float, count: int) -> None:
        self.timeout = tick * count
        self.peers = {name: PeerState() for name in peers}
        self.partitions: set[str] = set()

    def hello(self, peer: str, incarnation: str, app_running: bool, now: float) -> list[Event]:
        """The peer opened its link to us (or reconnected)."""
        state = self.peers[peer]
        if state.up and state.incarnation == incarnation:
            return self._app_state(peer, app_running, now)
        state.last_heard = now
        state.app_running = app_running
        events: list[Event] = []
        if state.up:  # a new incarnation without our noticing the old one die
            events.append(PeerDown(peer, "restarted"))
        restarted = state.incarnation is not None and state.incarnation != incarnation
        partition = state.incarnation == incarnation
        state.up, state.incarnation = True, incarnation
        if restarted:
            self.partitions.discard(peer)
        if partition:
            self.partitions.add(peer)
        events.append(PeerUp(peer, incarnation, restarted, partition))
        return events

    def heard(self, peer: str, incarnation: str, app_running: bool, now: float) -> list[Event]:
        state = self.peers[peer]
        if not state.up or state.incarnation != incarnation:
            return self.hello(peer, incarnation, app_running, now)
        return self._app_state(peer, app_running, now)

    def _app_state(self, peer: str, app_running: bool, now: float) -> list[Event]:
        state = self.peers[peer]
        state.last_heard = now
        was_running, state.app_running = state.app_running, app_running
        if was_running and not app_running:
            return [AppStopped(peer)]
        if app_running and not was_running:
            return [AppStarted(peer, state.incarnation or "")]
        return []

    def link_closed(self, peer: str) -> list[Event]:
        return self._down(peer, "connection closed")

    def tick(self, now: float) -> list[Event]:
        events: list[Event] = []
        for name, state in self.peers.items():
            if state.up and now - state.last_heard > self.timeout:
                events += self._down(name, f"no heartbeat for {self.timeout:g}s")
        return events

    def _down(self, peer: str, reason: str) -> list[Event]:
        state = self.peers[peer]
        if not state.up:
            return []
        state.up = False
        state.app_running = False
        return [PeerDown(peer, reason)]

    def running(self) -> list[str]:
        """Peers that are up with their broker app running."""
        return sorted(n for n, s in self.peers.items() if s.up and s.app_running)

    def reachable(self) -> list[str]:
        return sorted(n for n, s in self.peers.items() if s.up)
