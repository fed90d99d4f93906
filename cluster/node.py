"""One broker node as an OS process: ``python -m cluster.node --name N --amqp-port P
--mgmt-port M --data-dir DIR [--config FILE]``.

The asyncio shell around the I/O-free `Broker`: it owns the sockets, the timers, the
store's group commit (fsync in a worker thread, then confirms) and the management
server. ``stop_app``/``start_app`` tear the broker down and rebuild it from disk without
ending the process, like rabbitmqctl's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from cluster import events
from cluster.amqp.connection import Connection
from cluster.amqp.errors import INTERNAL_ERROR, ConnectionError_
from cluster.breakages import CATALOGUE, Breaks
from cluster.config import ConfigError, NodeConfig, load_config
from cluster.core.broker import Broker
from cluster.core.queue import Queue
from cluster.core.users import Permission
from cluster.definitions import DefinitionsError, DefinitionsFile
from cluster.events import EventLog
from cluster.ha.coordinator import Coordinator
from cluster.peer.boot import BootError, BootGate, LastRunningFile
from cluster.peer.codec import Envelope
from cluster.peer.detector import (
    AppStarted,
    AppStopped,
    Event,
    PartialPartition,
    PeerDown,
    PeerEvent,
    PeerLost,
    PeerUp,
)
from cluster.peer.links import ClusterSettings, PeerNetwork
from cluster.store import MessageStore

log = logging.getLogger("mirrorchaos.node")

SHUTDOWN_TEXT = "broker forced connection closure with reason 'shutdown'"


@dataclass
class NodeSettings:
    name: str
    data_dir: Path
    amqp_port: int
    mgmt_port: int | None = None
    host: str = "0.0.0.0"
    config_path: Path | None = None
    cluster: ClusterSettings | None = None
    partition_handling: str = "ignore"
    breaks: Breaks = field(default_factory=Breaks)
    peer_wait: float = 30.0  # how long a node that did not stop last waits for one that did
    force_boot: bool = False


class AMQPProtocol(asyncio.Protocol):
    """Bytes in → `Connection.receive_data`; the node writes what the broker queued."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.connection: Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("?", 0)
        broker = self.node.broker
        assert broker is not None
        self.connection = broker.open_connection(f"{peer[0]}:{peer[1]}")
        self.node.transports[self.connection] = transport

    def data_received(self, data: bytes) -> None:
        connection = self.connection
        broker = self.node.broker
        if connection is None or broker is None:
            return
        try:
            connection.receive_data(data)
            broker.after_input()
        except Exception as error:  # a broker bug must cost one connection, not the node
            log.exception("internal error on connection %s", connection.peer)
            connection.close_with_error(_internal_error(error))
        self.node.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        connection = self.connection
        if connection is None:
            return
        self.node.transports.pop(connection, None)
        if self.node.broker is not None:
            connection.connection_lost()
            self.node.broker.after_input()
            self.node.flush()

    def pause_writing(self) -> None:
        if self.connection is not None:
            self.connection.output_stalled()

    def resume_writing(self) -> None:
        if self.connection is not None and self.node.broker is not None:
            self.connection.output_resumed()
            self.node.flush()


# The first byte of Linux's tcp_info is the connection's state: the peer's FIN leaves
# it CLOSE_WAIT, a reset CLOSE.
_TCP_CLOSE, _TCP_CLOSE_WAIT = 7, 8


def _peer_has_closed(transport: asyncio.Transport) -> bool:
    sock = transport.get_extra_info("socket")
    if sock is None or not hasattr(socket, "TCP_INFO"):
        return False
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    except OSError:
        return True
    return state in (_TCP_CLOSE, _TCP_CLOSE_WAIT)


def _internal_error(error: Exception) -> ConnectionError_:
    return ConnectionError_(INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}")


class Node:
    def __init__(self, settings: NodeSettings, config: NodeConfig) -> None:
        self.settings = settings
        self.config = config
        self.events = EventLog(settings.data_dir / "events.jsonl", settings.name)
        self.definitions = DefinitionsFile(settings.data_dir / "definitions.json")
        self.broker: Broker | None = None
        self.store: MessageStore | None = None
        self.transports: dict[Connection, asyncio.Transport] = {}
        self._server: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._commit: asyncio.Task[None] | None = None
        # stop_app and start_app run one at a time, whoever asks (API, store failure).
        self._app_lock = asyncio.Lock()
        self.management: object | None = None
        self.coordinator: Coordinator | None = None
        # From the start of a stop_app until it is done, the cluster's input is dropped:
        # what the app took in after its last commit would be ordered, passed on to the
        # peers (who confirm it) and then discarded with the store's staged records.
        self._app_stopping = False
        self._sync_scheduled = False
        self._paused_for_minority = False
        # pause_minority after a partial partition: paused until every peer is back.
        self._awaiting_whole_cluster = False
        self._app_task: asyncio.Task[None] | None = None
        # A new incarnation per app start tells peers we restarted (not partitioned);
        # the first app start keeps the one the links said hello with.
        self.incarnation = uuid.uuid4().hex[:12]
        self._incarnation_used = False
        self.last_running = LastRunningFile(settings.data_dir / "cluster.json")
        self._remembered: frozenset[str] | None = None
        self._peers_changed = asyncio.Event()
        self._amqp_socket: socket.socket | None = None
        self._closing_links = False
        self.peers: PeerNetwork | None = None
        if settings.cluster is not None:
            self.peers = PeerNetwork(settings.name, settings.cluster, self._peer_status,
                                     self._peer_event, self._peer_message,
                                     self._after_cluster_input, self._peer_flow,
                                     config.broker.breaks.stale_proof_of_life)

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        if self.settings.mgmt_port is not None:
            from cluster.mgmt import start_management

            self.management = await start_management(
                self, self.settings.host, self.settings.mgmt_port
            )
        # Links first: the app must not take clients before it knows which peers run
        # and has their records, or it would serve the queues it recovered as their
        # master while the cluster has moved them on. Its port is held meanwhile.
        self._amqp_socket = self._bind_amqp()
        if self.peers is not None:
            # Our hellos say whom our file names: a peer starting with us learns
            # whether we saw it stop (`BootGate`).
            self._remembered = self.last_running.load()
            self.peers.outlived_by = self._remembered
            await self.peers.start()
            await self._await_boot()
        await self.start_app()
        self.events.emit(events.NodeStarted(amqp_port=self.settings.amqp_port,
                                            mgmt_port=self.settings.mgmt_port))

    async def _await_boot(self) -> None:
        """Hear from every peer (for at most one failure-detection window), then wait
        as the full-cluster restart rule says (`BootGate`)."""
        assert self.peers is not None and self.settings.cluster is not None
        detector = self.peers.detector
        cluster = self.settings.cluster
        gate = BootGate(frozenset(cluster.peers), self.last_running.load(),
                        self.settings.force_boot, me=self.settings.name)
        await self._peers_until(lambda: gate.discovered(set(detector.reachable())),
                                cluster.tick * cluster.count)
        if self.config.broker.breaks.boot_no_wait:
            return
        told: list[list[str]] = []

        def may_start() -> bool:
            running, reachable = set(detector.running()), set(detector.reachable())
            if gate.may_start(running, reachable, detector.outlived_by()):
                return True
            newer = gate.saw_us_stop(detector.outlived_by())
            if newer and gate.last_running <= reachable and newer not in told:
                # Every peer is here, but these saw us stop: we wait for them to run.
                told.append(newer)
                self.events.emit(events.BootWaiting(saw_us_stop=tuple(newer)))
            return False

        if not await self._peers_until(may_start, self.settings.peer_wait):
            raise BootError(gate.refusal(self.settings.peer_wait))

    async def _peers_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` holds after some peer event, for at most ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done():
            self._peers_changed.clear()
            try:
                await asyncio.wait_for(self._peers_changed.wait(), deadline - loop.time())
            except TimeoutError:
                return done()
        return True

    def _remember_running(self) -> None:
        """While the app runs, keep on disk which peers run too (the restart rule)."""
        assert self.peers is not None
        running = frozenset(self.peers.detector.running())
        if running != self._remembered:
            self.last_running.save(running)
            self._remembered = running
            self.peers.outlived_by = running

    async def start_app(self) -> None:
        async with self._app_lock:
            if self.broker is None:
                await self._start_app()

    async def _start_app(self) -> None:
        store = MessageStore(self.settings.data_dir / "messages",
                             fsync=not self.config.broker.breaks.no_fsync)
        try:
            recovery = store.recover()
            for tail in recovery.truncated:
                self.events.emit(events.StoreTailTruncated(
                    file=str(tail.file), offset=tail.offset, bytes_cut=tail.bytes_cut))
            broker = Broker(self.config.broker, log=store, events=self.events,
                            save_definitions=self.definitions.save)
            self._apply_definitions(broker)
            restored = broker.restore_messages(recovery.queues)
            incarnation = uuid.uuid4().hex[:12] if self._incarnation_used else self.incarnation
            coordinator = self._join_cluster(broker, incarnation)
        except BaseException:
            store.close()  # releases the store's lock so a later start_app can retry
            raise
        # The app runs from here: peers see the new incarnation and send the cluster's
        # metadata. Clients are let in once it has arrived, so that nothing is accepted
        # into a queue the cluster has since given to another master.
        self.store, self.broker = store, broker
        if self.peers is not None:  # a link may have filled while the app was stopped
            broker.set_peer_flow(self.peers.backlogged)
        self.incarnation, self.coordinator = incarnation, coordinator
        self._incarnation_used = True
        self._ticker = asyncio.create_task(self._tick_forever())
        if self.peers is not None:
            # Ahead of our metadata on each link: peers take it only from running apps.
            self.peers.announce()
            self._remember_running()
        self.flush()
        if coordinator is not None:
            await self._await_cluster_metadata(coordinator)
        try:
            sock, self._amqp_socket = self._amqp_socket or self._bind_amqp(), None
            self._server = await asyncio.get_running_loop().create_server(
                lambda: AMQPProtocol(self), sock=sock)
        except BaseException:
            self._ticker.cancel()
            self.broker = self.store = self.coordinator = None
            store.close()
            raise
        self.events.emit(events.AppStarted(recovered_messages=restored,
                                           incarnation=self.incarnation))
        self.flush()

    def _bind_amqp(self) -> socket.socket:
        """The AMQP port, bound but not listening: clients are refused until the app
        serves it."""
        family, kind, proto, _, address = socket.getaddrinfo(
            self.settings.host, self.settings.amqp_port, type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except BaseException:
            sock.close()
            raise
        return sock

    async def _await_cluster_metadata(self, coordinator: Coordinator) -> None:
        """Wait for every running peer's metadata, for at most the time it takes to
        decide a silent peer is down; for a peer whose app has yet to start (it holds
        a better copy of a queue recovered here), as long as for a peer at boot."""
        settled = asyncio.Event()
        coordinator.on_settled = settled.set
        if coordinator.awaiting:
            cluster = self.settings.cluster
            assert cluster is not None and self.peers is not None
            starting = coordinator.awaiting - set(self.peers.detector.running())
            timeout = self.settings.peer_wait if starting else cluster.tick * cluster.count
            try:
                await asyncio.wait_for(settled.wait(), timeout)
            except TimeoutError:
                self.events.emit(events.ClusterWaitTimeout(peers=tuple(sorted(coordinator.awaiting))))
                coordinator.stop_waiting()

    def _join_cluster(self, broker: Broker, incarnation: str) -> Coordinator | None:
        """With peers configured, the broker's queues become cluster queues: the ones
        recovered here start as masters until the cluster's records say otherwise."""
        if self.peers is None:
            return None
        coordinator = Coordinator(broker, self.settings.name, incarnation,
                                  list(self.settings.cluster.peers))  # type: ignore[union-attr]
        for vhost in broker.vhosts.values():
            for name, queue in list(vhost.queues.items()):
                if isinstance(queue, Queue) and queue.exclusive_owner is None:
                    succession = broker.saved_successions.get(vhost.name, {}).get(name, [])
                    vhost.queues[name] = coordinator.restored(queue, succession)
        detector = self.peers.detector
        running = detector.running()
        coordinator.join({peer: detector.peers[peer].incarnation or "" for peer in running},
                         frozenset(detector.reachable()) - frozenset(running))
        return coordinator

    def _apply_definitions(self, broker: Broker) -> None:
        saved = self.definitions.load()
        if saved is None:
            broker.add_user("guest", "guest", ["administrator"])
            broker.set_permissions("guest", "/", Permission())
        else:
            broker.load_definitions(saved)
        for vhost in self.config.vhosts:
            broker.add_vhost(vhost)
        for user in self.config.users:
            broker.add_user(user.name, user.password, user.tags)
        for p in self.config.permissions:
            broker.set_permissions(p.user, p.vhost, Permission(p.configure, p.write, p.read))
        broker.definitions_changed()

    async def stop_app(self) -> None:
        async with self._app_lock:
            await self._stop_app()

    async def _stop_app(self) -> None:
        broker, store = self.broker, self.store
        if broker is None or store is None:
            return
        assert self._server is not None and self._ticker is not None
        self._server.close()
        self._ticker.cancel()
        self._app_stopping = True
        try:
            if self.coordinator is not None:
                self.coordinator.leave()
                self.flush()
            broker.shutdown(SHUTDOWN_TEXT)
            self.flush()
            if self._commit is not None:
                await asyncio.gather(self._commit, return_exceptions=True)
            with contextlib.suppress(OSError):  # a failed store was already reported
                await asyncio.to_thread(store.commit)
            for transport in list(self.transports.values()):
                transport.close()
            self.transports.clear()
            store.close()
            self.broker = self.store = None
            self.coordinator = None
        finally:
            self._app_stopping = False
        if self.peers is not None:
            self.peers.announce()
        self.events.emit(events.AppStopped())

    async def stop(self) -> None:
        await self.stop_app()
        if self.peers is not None:
            self._closing_links = True
            await self.peers.stop()
        if self.management is not None:
            await self.management.cleanup()  # type: ignore[attr-defined]
        self.events.emit(events.NodeStopped())
        self.events.close()

    # -- peers --------------------------------------------------------------------------

    def _peer_status(self) -> tuple[str, bool]:
        return self.incarnation, self.broker is not None

    def _peer_event(self, event: Event) -> None:
        if self._closing_links:
            return  # our own shutdown closes them: no news of the peers (nor a pause)
        if isinstance(event, PartialPartition):
            self._partial_partition(event)
            return
        if isinstance(event, PeerLost):
            self._peer_lost(event.peer)
            return
        if isinstance(event, PeerUp):
            self.events.emit(events.PeerUp(peer=event.peer, incarnation=event.incarnation,
                                           restarted=event.restarted))
            if event.healed:
                self.events.emit(events.PartitionHealed(peer=event.peer))
            if event.partition:
                self.events.emit(events.PartitionDetected(peer=event.peer))
        elif isinstance(event, PeerDown):
            self.events.emit(events.PeerDown(peer=event.peer, reason=event.reason))
        elif isinstance(event, AppStarted):
            self.events.emit(events.PeerAppStarted(peer=event.peer))
        else:
            self.events.emit(events.PeerAppStopped(peer=event.peer))
        self._peers_changed.set()
        if self.broker is not None:
            self._remember_running()
        if self.settings.partition_handling == "pause_minority":
            # Before the cluster hears of it: a node about to pause must not act on the
            # loss of its peers (confirm what only it holds, promote its mirrors).
            self._pause_in_minority()
        coordinator = self.coordinator
        if coordinator is not None and not self._paused_for_minority and not self._app_stopping:
            self._tell_cluster(coordinator, event)
        self._after_cluster_input()

    def _tell_cluster(self, coordinator: Coordinator, event: PeerEvent) -> None:
        if isinstance(event, PeerDown) and self.settings.partition_handling == "pause_minority":
            return  # told once settled (`_peer_lost`): it may be a partial partition
        if isinstance(event, PeerDown | AppStopped):
            coordinator.peer_down(event.peer)
            return
        peers = self.peers
        assert peers is not None
        if not peers.detector.peers[event.peer].app_running:
            return
        if (isinstance(event, PeerUp) and event.unsettled
                and self.settings.partition_handling == "pause_minority"):
            # Back before the loss was settled, so the cluster layer never heard of it,
            # yet what we sent each other meanwhile may be lost (a delivery, an ack, a
            # cancel). Pause and resume, as for a partial partition: our peers drop what
            # they held for us, and we start afresh.
            self.events.emit(events.Restart(reason="partition healed before its loss settled",
                                            peer=event.peer))
            self._app_change(self._restart_app)
            return
        partitioned = event.peer in peers.detector.partitions
        if not partitioned or self.settings.partition_handling == "pause_minority":
            coordinator.peer_up(event.peer, event.incarnation)
        elif (self.settings.partition_handling == "autoheal" and self._autoheal_loses()
              and not self.config.broker.breaks.autoheal_no_restart):
            # The other side won: restart, so our mirrors rejoin theirs empty.
            self.events.emit(events.Restart(reason="autoheal",
                                            winners=tuple(sorted(peers.detector.partitions))))
            self._app_change(self._restart_app)
        # Otherwise the sides stay apart (ignore), or a loser will restart (autoheal).

    def _autoheal_loses(self) -> bool:
        """After a partition heals, the side with fewer nodes restarts (ties: the side
        without the first node by name), as every node of both sides works out alike."""
        assert self.peers is not None
        detector = self.peers.detector
        reachable = set(detector.reachable())
        other = detector.partitions & reachable
        mine = {self.settings.name} | (reachable - other)
        loses = (len(mine) < len(other) if len(mine) != len(other)
                 else min(mine | other) not in mine)
        return loses != self.config.broker.breaks.autoheal_wrong_winner

    def _peer_lost(self, peer: str) -> None:
        """pause_minority: the cluster hears of a lost peer once no peer we see still
        hears it, so that a node about to pause for a partial partition has not acted
        on the loss first (promoted its mirrors, confirmed what only it holds)."""
        coordinator = self.coordinator
        if (self.settings.partition_handling == "pause_minority" and coordinator is not None
                and not self._paused_for_minority):
            coordinator.peer_down(peer)
            self._after_cluster_input()

    def _partial_partition(self, event: PartialPartition) -> None:
        """A peer is down to us but not to another we see. As RabbitMQ: under
        pause_minority, pause until the whole cluster is back; otherwise make the
        partition a full one by disconnecting from the peer that still hears it."""
        assert self.peers is not None
        self.events.emit(events.PartialPartition(lost=event.lost, via=event.via))
        if self.settings.partition_handling == "pause_minority":
            self._awaiting_whole_cluster = True
            self._pause_in_minority()
        else:
            self.peers.disconnect(event.via, f"partial partition: it still hears {event.lost}")

    def _pause_in_minority(self) -> None:
        """pause_minority: the app stops while this node reaches no more than half of
        the cluster (or, after a partial partition, until it reaches all of it), and
        starts again once it reaches a majority."""
        assert self.peers is not None
        total = len(self.peers.settings.peers) + 1
        reachable = len(self.peers.detector.reachable()) + 1
        if reachable == total:
            self._awaiting_whole_cluster = False
        minority = reachable * 2 <= total
        pause = ((minority or self._awaiting_whole_cluster)
                 and not self.config.broker.breaks.pause_minority_ignored)
        if pause and not self._paused_for_minority:
            self._paused_for_minority = True
            self.events.emit(events.Paused(reason="minority" if minority else "partial partition",
                                           reachable=reachable, nodes=total))
            self._app_change(self.stop_app)
        elif (not pause and self._paused_for_minority
              and not self.config.broker.breaks.pause_never_resumes):
            self._paused_for_minority = False
            self.events.emit(events.Resumed(reachable=reachable, nodes=total))
            self._app_change(self.start_app)

    def _app_change(self, change: Callable[[], Awaitable[None]]) -> None:
        """Stop or start the app from an event handler: in order, one at a time."""
        previous = self._app_task

        async def run() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await change()

        self._app_task = asyncio.get_running_loop().create_task(run())

    async def _restart_app(self) -> None:
        await self.stop_app()
        await self.start_app()

    def _peer_message(self, peer: str, envelope: Envelope) -> None:
        """One envelope of a read from ``peer``; the links call `_after_cluster_input`
        once the whole read is handled, so that what a batch of messages makes goes out
        together (one GM message per hop for many publishes, one write per peer)."""
        coordinator = self.coordinator
        if coordinator is None or self._app_stopping:
            return
        try:
            coordinator.received(peer, envelope)
        except Exception:  # a cluster bug must cost one message, not the node
            log.exception("internal error handling %r from %s", envelope.type, peer)

    def _after_cluster_input(self) -> None:
        if self.broker is not None:
            self.broker.after_input()
            self.flush()

    def _peer_flow(self, backlogged: bool) -> None:
        """A link to a peer filled up or drained: publishers wait or go on, and so does
        a sync's next batch. It may run inside a flush (a write that fills a link): the
        outer flush has taken the coordinator's outbox by then, so this one only applies
        the connections' reading state, and the outer one finds nothing left to do."""
        if self.broker is not None:
            self.broker.set_peer_flow(backlogged)
            self.flush()

    # -- the shell's duties -------------------------------------------------------------

    def flush(self) -> None:
        """Write every dirty connection's output, apply its socket state, and start a
        group commit if the store has staged records."""
        broker = self.broker
        if broker is None:
            return
        coordinator = self.coordinator
        if coordinator is not None and self.peers is not None:
            by_peer: dict[str, list[Envelope]] = {}
            for peer, envelope in coordinator.take_outbox():
                by_peer.setdefault(peer, []).append(envelope)
            for peer, envelopes in by_peer.items():
                self.peers.send_all(peer, envelopes)
            if (coordinator.sync_sending() and not self._sync_scheduled
                    and not self.peers.backlogged):
                # A sync goes a batch per turn of the loop, so that cancel_sync_queue
                # and everything else get in between.
                self._sync_scheduled = True
                asyncio.get_running_loop().call_soon(self._sync_step)
        while broker.dirty:
            connection = broker.dirty.pop()
            transport = self.transports.get(connection)
            data = connection.take_output()
            if transport is None:
                continue
            if data:
                transport.write(data)
                connection.output_written()
            if connection.should_close:
                if connection.output_stalled_since is None:
                    transport.close()
                else:  # close() would wait for ever to write what the client does not read
                    transport.abort()
            elif connection.reading_paused != (not transport.is_reading()):
                if connection.reading_paused:
                    transport.pause_reading()
                else:
                    transport.resume_reading()
        store = self.store
        if store is not None and store.staged_lsn > broker.durable_lsn and self._commit is None:
            self._commit = asyncio.get_running_loop().create_task(self._group_commit())

    def _sync_step(self) -> None:
        self._sync_scheduled = False
        if self.coordinator is not None and self.broker is not None:
            self.coordinator.sync_step()
            self.broker.after_input()
            self.flush()

    async def _group_commit(self) -> None:
        """fsync in a worker thread; everything staged meanwhile rides the next commit."""
        try:
            while (store := self.store) is not None and (broker := self.broker) is not None:
                if store.staged_lsn <= broker.durable_lsn:
                    break
                try:
                    lsn = await asyncio.to_thread(store.commit)
                except OSError as error:
                    # The store refuses everything after a failed commit: nack what
                    # waits, then stop the app so no client is promised durability.
                    broker.on_store_failure(error)
                    self.flush()
                    asyncio.get_running_loop().create_task(self.stop_app())
                    break
                if self.broker is broker:
                    broker.on_durable(lsn)
                    self.flush()
        finally:
            self._commit = None

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if self.broker is not None:
                self.broker.tick()
                self.flush()
                self._drop_vanished_clients()

    def _drop_vanished_clients(self) -> None:
        """A socket we do not read (memory alarm, output stalled) never reports that its
        client went away; without this, a flood's connections would hold their bodies
        and the alarm for ever."""
        for transport in list(self.transports.values()):
            if not transport.is_reading() and _peer_has_closed(transport):
                transport.abort()


async def run_node(settings: NodeSettings, config: NodeConfig) -> None:
    node = Node(settings, config)
    await node.start()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    planted = settings.breaks.names
    print(f"node {settings.name} ready: amqp {settings.host}:{settings.amqp_port}"
          + (f", management {settings.mgmt_port}" if settings.mgmt_port is not None else "")
          + (f", planted bugs: {' '.join(planted)}" if planted else ""),
          file=sys.stderr, flush=True)
    await stopping.wait()
    await node.stop()


def parse_args(argv: list[str] | None = None) -> NodeSettings:
    parser = argparse.ArgumentParser(prog="python -m cluster.node", description=__doc__)
    parser.add_argument("--name", required=True, help="node name, e.g. rabbit@n1")
    parser.add_argument("--amqp-port", type=int, required=True)
    parser.add_argument("--mgmt-port", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--config", type=Path, default=None, help="TOML config file")
    parser.add_argument("--cluster-name", default="mirrorchaos",
                        help="peers must name the same cluster (default %(default)s)")
    parser.add_argument("--cluster-port", type=int, default=None,
                        help="port for links from peers (needed with --peer)")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="a peer node and the address this node dials to reach it "
                             "(repeatable; may be a proxy for this directed link)")
    parser.add_argument("--tick", type=float, default=1.0,
                        help="seconds between heartbeats to peers (default %(default)s)")
    parser.add_argument("--tick-count", type=int, default=4,
                        help="missed ticks before a peer counts as down (default %(default)s)")
    parser.add_argument("--break", dest="breaks", action="append", default=[],
                        choices=sorted(CATALOGUE), metavar="NAME",
                        help="run with a planted bug, to show that the harness catches it "
                             "(repeatable; docs/planted-bugs.md): "
                             + "; ".join(f"{b.name}: {b.breaks}" for b in CATALOGUE.values()))
    parser.add_argument("--partition-handling", default="ignore",
                        choices=("ignore", "pause_minority", "autoheal"),
                        help="what a node does about a network partition, as RabbitMQ's "
                             "cluster_partition_handling (default %(default)s)")
    parser.add_argument("--peer-wait", type=float, default=30.0, metavar="SECONDS",
                        help="a node that stopped while peers still ran waits this long "
                             "for one of them before refusing to start (default %(default)s)")
    parser.add_argument("--force-boot", action="store_true",
                        help="start even if peers that stopped after this node are down "
                             "(its queues may be older than theirs)")
    args = parser.parse_args(argv)
    cluster = None
    if args.peer:
        if args.cluster_port is None:
            parser.error("--peer needs --cluster-port")
        peers = dict(_peer_address(parser, text) for text in args.peer)
        cluster = ClusterSettings(args.cluster_name, args.host, args.cluster_port, peers,
                                  args.tick, args.tick_count)
    return NodeSettings(args.name, args.data_dir, args.amqp_port, args.mgmt_port, args.host,
                        args.config, cluster, args.partition_handling, Breaks.of(args.breaks),
                        args.peer_wait, args.force_boot)


def _peer_address(parser: argparse.ArgumentParser, text: str) -> tuple[str, tuple[str, int]]:
    name, _, address = text.partition("=")
    host, _, port = address.rpartition(":")
    if not name or not host or not port.isdigit():
        parser.error(f"--peer {text!r}: expected NAME=HOST:PORT")
    return name, (host, int(port))


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(settings.config_path, settings.name)
        config.broker.breaks = settings.breaks
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_node(settings, config))
    except (ConfigError, DefinitionsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BootError as error:
        print(f"error: node {settings.name} refused to start: {error}", file=sys.stderr)
        return 3
    except OSError as error:
        print(f"error: node {settings.name} could not start: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
