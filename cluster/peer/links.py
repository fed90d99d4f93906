"""The asyncio shell of node-to-node links.

Outbound: one connection per peer, to the address configured for that peer; it says
hello (cluster, node, incarnation, app state), then sends a heartbeat every tick and
whatever the node sends. Inbound: a listener that accepts peers' outbound links, checks
their hello and feeds what they send to the failure detector and the node. A link
whose peer stops talking, or whose send buffer stops draining, is dropped and redialled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from cluster.peer.codec import CodecError, Envelope, FrameBuffer, encode
from cluster.peer.detector import (
    Answer,
    Ask,
    Event,
    FailureDetector,
    Heartbeat,
    Output,
    PeerDown,
    Probe,
)
from cluster.reads import BufferedReader

log = logging.getLogger("mirrorchaos.peer")

# Unsent bytes on a link to a peer above which the node stops reading its publishers
# and sending sync batches, and below which it goes on: as RabbitMQ's credit flow holds
# publishers behind a busy distribution link. A link is never cut for being slow (that
# would split the cluster); a peer that stopped reading is found by the detector.
FLOW_HIGH = 16 * 1024 * 1024
FLOW_LOW = 4 * 1024 * 1024


@dataclass
class ClusterSettings:
    name: str
    listen_host: str
    listen_port: int
    peers: dict[str, tuple[str, int]] = field(default_factory=dict)
    tick: float = 1.0
    count: int = 4


class _Inbound(BufferedReader):
    def __init__(self, network: PeerNetwork) -> None:
        self.network = network
        self.frames = FrameBuffer()
        self.peer: str | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            # Bytes are news from the peer, part of a frame too: a busy node reads a
            # large frame (a GM catch-up of megabytes) a piece per turn for seconds.
            self.network.heard_from(self.peer)
        try:
            envelopes = self.frames.feed(data)
        except CodecError as error:
            log.warning("closing link from %s: %s", self.peer or "unknown peer", error)
            self.close()
            return
        for envelope in envelopes:
            if self.peer is None:
                self.peer = self.network.accept_hello(self, envelope)
                if self.peer is None:
                    self.close()
                    return
            else:
                self.network.received(self.peer, envelope)
        self.network.read_handled()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.network.inbound_lost(self.peer, self)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _Outbound(asyncio.Protocol):
    def __init__(self, on_flow: Callable[[bool], None]) -> None:
        self.closed = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self._on_flow = on_flow

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=FLOW_HIGH, low=FLOW_LOW)

    def pause_writing(self) -> None:
        self._on_flow(True)

    def resume_writing(self) -> None:
        self._on_flow(False)

    def data_received(self, data: bytes) -> None:
        return  # peers never answer on our outbound link

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class PeerNetwork:
    def __init__(
        self,
        me: str,
        settings: ClusterSettings,
        status: Callable[[], tuple[str, bool]],
        on_event: Callable[[Event], None],
        on_message: Callable[[str, Envelope], None],
        on_read: Callable[[], None],
        on_flow: Callable[[bool], None],
        stale_proof_of_life: bool = False,
    ) -> None:
        self.me = me
        self.settings = settings
        self._status = status
        self._on_event = on_event
        self._on_message = on_message
        self.detector = FailureDetector(me, list(settings.peers), settings.tick,
                                        settings.count, stale_proof_of_life)
        self._inbound: dict[str, _Inbound] = {}
        self._outbound: dict[str, asyncio.Transport] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._server: asyncio.Server | None = None
        self._on_read = on_read
        self._on_flow = on_flow
        # Peers whose link holds more than FLOW_HIGH unsent bytes (until under FLOW_LOW).
        self._backlogged: set[str] = set()
        # What this node's last-running file names, told to peers with our status: a
        # peer starting after a full-cluster stop learns whether we saw it stop.
        self.outlived_by: frozenset[str] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Inbound(self), self.settings.listen_host, self.settings.listen_port,
            reuse_address=True,
        )
        self._tasks = [loop.create_task(self._dial(peer)) for peer in self.settings.peers]
        self._tasks.append(loop.create_task(self._watch()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        for inbound in list(self._inbound.values()):
            inbound.close()

    def send(self, peer: str, envelope: Envelope) -> bool:
        """Queue an envelope on the link to ``peer``; False when there is no link."""
        return self.send_all(peer, [envelope])

    def send_all(self, peer: str, envelopes: list[Envelope]) -> bool:
        """Queue envelopes on the link to ``peer`` in one write (one system call for
        a whole batch of cluster traffic); False when there is no link."""
        transport = self._outbound.get(peer)
        if transport is None or transport.is_closing():
            return False
        transport.write(b"".join([encode(envelope) for envelope in envelopes]))
        return True

    @property
    def backlogged(self) -> bool:
        """Some link holds more unsent bytes than FLOW_HIGH (and not yet under FLOW_LOW):
        publishers and syncs wait."""
        return bool(self._backlogged)

    def _drop_backlog(self, peer: str) -> None:
        """A peer that is down with our link to it backlogged (whichever came first)
        holds our publishers for nothing: drop the link and what it holds (dialled again
        after half a tick; a peer that comes back gets our hello and a metadata snapshot
        anew)."""
        transport = self._outbound.get(peer)
        if transport is not None:
            transport.abort()

    def _link_flow(self, peer: str, busy: bool) -> None:
        if busy and not self.detector.peers[peer].up:
            self._drop_backlog(peer)
            return
        before = self.backlogged
        if busy:
            self._backlogged.add(peer)
        else:
            self._backlogged.discard(peer)
        if self.backlogged != before:
            log.info("peer link to %s %s", peer, "backlogged: publishers wait" if busy
                     else "drained: publishers go on")
            self._on_flow(self.backlogged)

    def announce(self) -> None:
        """Tell every peer our app state and whom we hear now, ahead of the next
        heartbeat and of anything the app sends."""
        for peer in list(self._outbound):
            self.send(peer, self._heartbeat())

    def disconnect(self, peer: str, reason: str) -> None:
        """Take ``peer`` down and ask it to do the same of us (a partial partition made
        full): our links stay, so each comes back up to the other as partitioned."""
        self.send(peer, Envelope("disconnect", {}))
        self._emit(self.detector.disconnect(peer, reason, self._now()))

    def _heartbeat(self) -> Envelope:
        return Envelope("hb", self._status_fields())

    def _hello(self) -> Envelope:
        return Envelope("hello", {"cluster": self.settings.name, "node": self.me,
                                  **self._status_fields()})

    def _status_fields(self) -> dict[str, object]:
        incarnation, running = self._status()
        fields: dict[str, object] = {"incarnation": incarnation, "app": running,
                                     "hears": self.detector.hears()}
        if self.outlived_by is not None:
            fields["outlived_by"] = sorted(self.outlived_by)
        return fields

    # -- inbound ------------------------------------------------------------------------

    def accept_hello(self, inbound: _Inbound, envelope: Envelope) -> str | None:
        fields = envelope.fields
        peer = fields.get("node")
        if envelope.type != "hello" or fields.get("cluster") != self.settings.name:
            log.warning("refusing a link: expected hello for cluster %r, got %s %r",
                        self.settings.name, envelope.type, fields)
            return None
        if peer not in self.detector.peers:
            log.warning("refusing a link from %r: not a configured peer", peer)
            return None
        assert isinstance(peer, str)
        previous = self._inbound.get(peer)
        self._inbound[peer] = inbound
        if previous is not None:
            previous.peer = None  # replaced: its closing must not mark the peer down
            previous.close()
        self._heard(peer, envelope)
        return peer

    def _heard(self, peer: str, envelope: Envelope) -> None:
        fields = envelope.fields
        hears = fields.get("hears")
        outlived_by = fields.get("outlived_by")
        self._emit(self.detector.heard(
            peer, str(fields.get("incarnation")), bool(fields.get("app")),
            [str(n) for n in hears] if isinstance(hears, list) else [], self._now(),
            [str(n) for n in outlived_by] if isinstance(outlived_by, list) else None))

    def received(self, peer: str, envelope: Envelope) -> None:
        kind = envelope.type
        if kind in ("hb", "hello"):
            self._heard(peer, envelope)
            return
        if kind == "ask":
            self._emit(self.detector.asked(peer, str(envelope.fields.get("node"))))
            return
        if kind == "answer":
            fields = envelope.fields
            self._emit(self.detector.answered(peer, str(fields.get("node")),
                                              fields.get("hears") is True))
            return
        if kind == "disconnect":
            self._emit(self.detector.disconnect(peer, "it disconnected from us", self._now()))
            return
        if kind in ("probe", "reply"):
            seq = envelope.fields.get("seq")
            if not isinstance(seq, int):
                log.warning("ignoring a %s from %s without an integer seq: %r", kind, peer,
                            envelope.fields)
            elif kind == "probe":
                self.send(peer, Envelope("reply", {"seq": seq}))
            else:
                self._emit(self.detector.replied(peer, seq))
            return
        if self.detector.peers[peer].up:
            self._on_message(peer, envelope)

    def heard_from(self, peer: str) -> None:
        """Bytes from the peer arrived: its link is alive."""
        self.detector.message(peer, self._now())

    def inbound_lost(self, peer: str, inbound: _Inbound) -> None:
        if self._inbound.get(peer) is inbound:
            del self._inbound[peer]
            outputs = self.detector.link_closed(peer, self._now())
            self.announce()
            self._emit(outputs)

    def read_handled(self) -> None:
        """A read's envelopes have all been passed on: the node may act on them as a
        batch (one flush of its output, not one per message)."""
        self._on_read()

    # -- outbound -----------------------------------------------------------------------

    async def _dial(self, peer: str) -> None:
        host, port = self.settings.peers[peer]
        loop = asyncio.get_running_loop()
        tick = self.settings.tick
        while True:
            # asyncio.timeout, not wait_for: in Python 3.11 wait_for drops a cancel that
            # lands as its wait ends, and a node stopping beside its peers dialled on
            # for ever instead of stopping.
            try:
                async with asyncio.timeout(tick * self.settings.count):
                    transport, protocol = await loop.create_connection(
                        partial(_Outbound, partial(self._link_flow, peer)), host, port)
            except (OSError, TimeoutError):
                await asyncio.sleep(tick / 2)
                continue
            assert isinstance(transport, asyncio.Transport)
            self._outbound[peer] = transport
            try:
                transport.write(encode(self._hello()))
                while not protocol.closed.done():
                    self.send(peer, self._heartbeat())
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(tick):
                            await asyncio.shield(protocol.closed)
            finally:
                if self._outbound.get(peer) is transport:
                    del self._outbound[peer]
                    self._link_flow(peer, False)  # what it held is gone with it
                transport.abort()
            await asyncio.sleep(tick / 2)

    # -- time ---------------------------------------------------------------------------

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick / 2)
            outputs = self.detector.tick(self._now())
            silent = [peer for peer, state in self.detector.peers.items()
                      if not state.linked and peer in self._inbound]
            for peer in silent:
                # A silent peer must say hello again before we believe it is back.
                inbound = self._inbound.pop(peer)
                inbound.peer = None
                inbound.close()
            if silent:
                self.announce()  # whom we hear changed: before any question goes out
            self._emit(outputs)

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def _emit(self, outputs: list[Output]) -> None:
        for output in outputs:
            if isinstance(output, Heartbeat):
                self.send(output.to, self._heartbeat())
            elif isinstance(output, Ask):
                self.send(output.to, Envelope("ask", {"node": output.about}))
            elif isinstance(output, Probe):
                self.send(output.to, Envelope("probe", {"seq": output.seq}))
            elif isinstance(output, Answer):
                self.send(output.to, Envelope("answer", {"node": output.about,
                                                         "hears": output.hears}))
            else:
                if isinstance(output, PeerDown) and output.peer in self._backlogged:
                    self._drop_backlog(output.peer)
                self._on_event(output)
