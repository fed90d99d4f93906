"""One broker node as an OS process: ``python -m cluster.node --name N --amqp-port P
--mgmt-port M --data-dir DIR [--config FILE]``.

The asyncio shell around the I/O-free `Broker`: it owns the timers, the store's group
commit (fsync in a worker thread, then confirms), the definitions saves (in a worker
thread; the client sockets, `cluster.sockets`, hold the output that may tell of them
until they are on disk), the peers' links and the management server. Its settings come
from the command line (`cluster.settings`). Every batch of input ends in one
`Node.pump`. What the failure detector reports of the peers, the partition policy
(`cluster.peer.partition_policy`) decides about and the node carries out.
``stop_app``/``start_app`` tear the broker down and rebuild it from disk without ending
the process, like rabbitmqctl's.

Some 550 lines, one class: boot, the app's life, the peers' events and the flush all
read and change the same state (the running broker, its store and coordinator, the
links), and splitting them would pass that state around instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable

from cluster import events
from cluster.config import ConfigError, NodeConfig, load_config
from cluster.core.queue import Queue
from cluster.core.users import Permission
from cluster.definitions import DefinitionsError, DefinitionsFile
from cluster.events import EventLog
from cluster.ha.checks import MalformedEnvelope
from cluster.ha.coordinator import Coordinator
from cluster.peer.boot import BootError, BootGate, LastRunningFile
from cluster.peer.codec import Envelope
from cluster.peer.detector import Event, PeerEvent
from cluster.peer.links import PeerNetwork
from cluster.peer.partition_policy import (
    Action,
    Disconnect,
    Emit,
    PartitionPolicy,
    PauseApp,
    RestartApp,
    ResumeApp,
    TellPeerDown,
    TellPeerUp,
)
from cluster.session.broker import Broker
from cluster.session.connection import Connection
from cluster.settings import NodeSettings, parse_args
from cluster.sockets import AMQPProtocol, ClientSockets
from cluster.store import MessageStore

log = logging.getLogger("mirrorchaos.node")

SHUTDOWN_TEXT = "broker forced connection closure with reason 'shutdown'"


class Node:
    def __init__(self, settings: NodeSettings, config: NodeConfig) -> None:
        self.settings = settings
        self.config = config
        self.events = EventLog(settings.data_dir / "events.jsonl", settings.name)
        self.definitions = DefinitionsFile(settings.data_dir / "definitions.json",
                                           on_saved=self.flush,
                                           on_failure=self._definitions_failed)
        self.broker: Broker | None = None
        self.store: MessageStore | None = None
        self.sockets = ClientSockets(self.definitions)
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
        self.partitions: PartitionPolicy | None = None
        if settings.cluster is not None:
            self.peers = PeerNetwork(settings.name, settings.cluster, self._peer_status,
                                     self._peer_event, self._peer_message, self.pump,
                                     self._peer_flow, config.broker.breaks.stale_proof_of_life)
            self.partitions = PartitionPolicy(settings.name, self.peers.detector,
                                              settings.partition_handling, config.broker.breaks)

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
            try:  # asyncio.timeout, not wait_for: see PeerNetwork._dial
                async with asyncio.timeout_at(deadline):
                    await self._peers_changed.wait()
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
                async with asyncio.timeout(timeout):
                    await settled.wait()
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
            # The definitions as the app leaves them, and the output held for them.
            await self.definitions.saved()
            self.sockets.close_all()
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
        """The partition policy decides what a detector event means; the node does it."""
        if self._closing_links:
            return  # our own shutdown closes them: no news of the peers (nor a pause)
        assert self.partitions is not None
        if isinstance(event, PeerEvent):
            self._peers_changed.set()
            if self.broker is not None:
                self._remember_running()
        takes_input = self.coordinator is not None and not self._app_stopping
        for action in self.partitions.handle(event, takes_input):
            self._act(action)
        self.pump()

    def _act(self, action: Action) -> None:
        match action:
            case Emit(event):
                self.events.emit(event)
            case PauseApp():
                self._app_change(self.stop_app)
            case ResumeApp():
                self._app_change(self.start_app)
            case RestartApp():
                self._app_change(self._restart_app)
            case TellPeerUp(peer, incarnation):
                assert self.coordinator is not None
                self.coordinator.peer_up(peer, incarnation)
            case TellPeerDown(peer):
                assert self.coordinator is not None
                self.coordinator.peer_down(peer)
            case Disconnect(peer, reason):
                assert self.peers is not None
                self.peers.disconnect(peer, reason)

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
        """One envelope of a read from ``peer``; the links call `pump` once the whole
        read is handled, so that what a batch of messages makes goes out together (one
        GM message per hop for many publishes, one write per peer)."""
        coordinator = self.coordinator
        if coordinator is None or self._app_stopping:
            return
        try:
            coordinator.received(peer, envelope)
        except MalformedEnvelope as error:  # the peer's fault: it is dropped, and said so
            log.error("peer protocol error from %s: %s", peer, error)
        except Exception:  # a cluster bug must cost one message, not the node
            log.exception("internal error handling %r from %s", envelope.type, peer)

    def _peer_flow(self, backlogged: bool) -> None:
        """A link to a peer filled up or drained: publishers wait or go on, and so does
        a sync's next batch. It may run inside a flush (a write that fills a link): the
        outer flush has taken the coordinator's outbox by then, so this one only applies
        the connections' reading state, and the outer one finds nothing left to do."""
        if self.broker is not None:
            self.broker.set_peer_flow(backlogged)
            self.flush()

    @property
    def transports(self) -> dict[Connection, asyncio.Transport]:
        """The sockets of the clients, by connection (the management API's view)."""
        return self.sockets.transports

    # -- the shell's duties -------------------------------------------------------------

    def pump(self) -> None:
        """After each batch of input (a client's bytes or its going, a read from a peer,
        a peer event, a sync step, a management write): the broker's and the cluster
        layer's end-of-batch work, then `flush`."""
        if self.broker is not None:
            self.broker.after_input()
            self.flush()

    def flush(self) -> None:
        """Send the cluster layer's envelopes, start a save of the definitions if they
        changed, write the connections' output, and start a group commit if the store
        has staged records."""
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
        if broker.definitions_dirty:
            # Before the output is taken: the changes it may tell of are in this one.
            self.definitions.save_soon(broker.take_definitions())
        self.sockets.write_output(broker)
        store = self.store
        if store is not None and store.staged_lsn > broker.durable_lsn and self._commit is None:
            self._commit = asyncio.get_running_loop().create_task(self._group_commit())

    def _sync_step(self) -> None:
        self._sync_scheduled = False
        if self.coordinator is not None:
            self.coordinator.sync_step()
            self.pump()

    async def _group_commit(self) -> None:
        """fsync in a worker thread; everything staged meanwhile rides the next commit."""
        try:
            while (store := self.store) is not None and (broker := self.broker) is not None:
                if store.staged_lsn <= broker.durable_lsn:
                    break
                try:
                    lsn = await asyncio.to_thread(store.commit)
                except OSError as error:
                    self._store_failed(broker, error)
                    break
                if self.broker is broker:
                    broker.on_durable(lsn)
                    self.flush()
        finally:
            self._commit = None

    def _definitions_failed(self, error: OSError) -> None:
        if self.broker is not None:
            self._store_failed(self.broker, error)

    def _store_failed(self, broker: Broker, error: OSError) -> None:
        """A commit or a definitions save failed. The store refuses everything after a
        failed commit, and what a failed save held is not on disk: nack what waits,
        then stop the app so no client is promised durability."""
        broker.on_store_failure(error)
        self.flush()
        asyncio.get_running_loop().create_task(self.stop_app())

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if self.broker is not None:
                self.broker.tick()
                self.flush()
                self.sockets.drop_vanished()

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


# Objects allocated between two passes of the cycle collector over the youngest ones.
# A publish allocates a few short-lived containers, all freed by their reference counts;
# at Python's default (700) the passes over them took about a tenth of a mirror's CPU
# under `mirrorchaos bench` (docs/cluster-design.md, "The node shell").
GC_YOUNG_THRESHOLD = 10_000


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    gc.set_threshold(GC_YOUNG_THRESHOLD)
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
