"""Link topology: one toxiproxy proxy per directed node-to-node link and one per
client-to-node link, made from the cluster description.

A node dials each peer at the address of the proxy for that directed link
(``link:n1->n2`` carries what n1 sends to n2), so every direction can be cut or
degraded alone; each client reaches its node through its own proxy
(``client:c1->n1``). The topology deletes every proxy it created when torn down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Literal

from cluster.peer.codec import Envelope, encode

from .client import NotFound, Probe, ProxySpec, RefusalProbe, ReplyProbe, ToxiproxyClient
from .client.errors import ToxiproxyError
from .client.probes import split_address

LinkKind = Literal["node", "client"]

# What crosses a node link is only ever sent by the dialling node; the listener
# refuses (closes) a connection whose first frame is not a hello for its cluster.
NODE_LINK_PROBE: Probe = RefusalProbe(encode(Envelope("probe", {"by": "mirrorchaos link check"})))
# An AMQP 0-9-1 server answers the protocol header with connection.start on channel 0.
AMQP_PROBE: Probe = ReplyProbe(b"AMQP\x00\x00\x09\x01", expect=b"\x01\x00\x00")


@dataclass(frozen=True)
class NodeAddress:
    """Where a node listens, as its peers and clients would reach it directly."""

    name: str
    host: str
    cluster_port: int
    amqp_port: int


@dataclass(frozen=True)
class Link:
    name: str
    kind: LinkKind
    source: str  # the dialling node, or the client id
    target: str  # the node dialled
    listen: str  # the proxy's listen address as toxiproxy reports it
    address: str  # what the source dials to reach the target through the proxy
    upstream: str  # the target's own address


def node_link_name(source: str, target: str) -> str:
    return f"link:{source}->{target}"


def client_link_name(client: str, node: str) -> str:
    return f"client:{client}->{node}"


class Topology:
    """Build with `Topology.create`; ``listen_host`` is where toxiproxy binds the
    proxies and ``dial_host`` how nodes and clients reach them (the same for local
    processes; the toxiproxy container's name when it runs in one). ``duplex`` says
    whether a node also sends to a peer over the connection that peer dialled (our
    nodes never do; RabbitMQ's Erlang distribution does), which decides what a
    partition must cut. ``node_listen`` gives a node link's proxy a fixed address,
    which is also the one its source dials (for nodes that find a peer by name at a
    fixed port, as Erlang distribution does); by default each proxy takes a free port
    on ``listen_host``."""

    def __init__(self, client: ToxiproxyClient, nodes: Sequence[NodeAddress], *,
                 listen_host: str = "127.0.0.1", dial_host: str | None = None,
                 node_probe: Probe = NODE_LINK_PROBE, client_probe: Probe = AMQP_PROBE,
                 duplex: bool = False,
                 node_listen: Callable[[str, str], str] | None = None) -> None:
        names = [node.name for node in nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique, got {names}")
        self.client = client
        self.nodes = {node.name: node for node in nodes}
        self.listen_host = listen_host
        self.dial_host = dial_host or listen_host
        self.duplex = duplex
        self._node_listen = node_listen
        self._probes: dict[LinkKind, Probe] = {"node": node_probe, "client": client_probe}
        self._links: dict[str, Link] = {}

    @classmethod
    def create(cls, client: ToxiproxyClient, nodes: Sequence[NodeAddress], *,
               listen_host: str = "127.0.0.1", dial_host: str | None = None,
               node_probe: Probe = NODE_LINK_PROBE, client_probe: Probe = AMQP_PROBE,
               duplex: bool = False, node_listen: Callable[[str, str], str] | None = None,
               clients: Iterable[tuple[str, str]] = ()) -> Topology:
        """Every directed node link, plus a link for each ``(client id, node)``."""
        topology = cls(client, nodes, listen_host=listen_host, dial_host=dial_host,
                       node_probe=node_probe, client_probe=client_probe, duplex=duplex,
                       node_listen=node_listen)
        try:
            for source, target in permutations(topology.nodes, 2):
                topology._add("node", source, target)
            for client_id, node in clients:
                topology.add_client(client_id, node)
        except BaseException:
            topology.teardown()
            raise
        return topology

    def add_client(self, client_id: str, node: str) -> Link:
        return self._add("client", client_id, node)

    def _add(self, kind: LinkKind, source: str, target: str) -> Link:
        address = self.nodes[target]
        if kind == "node":
            name, port = node_link_name(source, target), address.cluster_port
        else:
            name, port = client_link_name(source, target), address.amqp_port
        upstream = f"{address.host}:{port}"
        if kind == "node" and self._node_listen is not None:
            listen = dial = self._node_listen(source, target)
            proxy = self.client.create_proxy(name, upstream, listen=listen)
        else:
            proxy = self.client.create_proxy(name, upstream, listen=f"{self.listen_host}:0")
            dial = f"{self.dial_host}:{split_address(proxy.listen)[1]}"
        link = Link(name, kind, source, target, proxy.listen, dial, upstream)
        self._links[name] = link
        return link

    # -- lookups ------------------------------------------------------------------------

    @property
    def links(self) -> list[Link]:
        return list(self._links.values())

    @property
    def node_links(self) -> list[Link]:
        return [link for link in self._links.values() if link.kind == "node"]

    @property
    def client_links(self) -> list[Link]:
        return [link for link in self._links.values() if link.kind == "client"]

    def link(self, name: str) -> Link:
        try:
            return self._links[name]
        except KeyError:
            raise KeyError(f"no link {name!r} in this topology") from None

    def node_link(self, source: str, target: str) -> Link:
        return self.link(node_link_name(source, target))

    def peers(self, node: str) -> dict[str, str]:
        """For each peer, the address ``node`` must dial (its proxy's)."""
        return {link.target: link.address for link in self.node_links if link.source == node}

    def client_address(self, client_id: str, node: str) -> str:
        return self.link(client_link_name(client_id, node)).address

    def spec(self, link: Link) -> ProxySpec:
        """What the heal verifier restores the link's proxy to, and how it probes it."""
        return ProxySpec(link.name, link.listen, link.upstream, link.address,
                         self._probes[link.kind])

    def probe(self, link: Link, timeout: float = 1.0) -> bool:
        """Do bytes cross the link's proxy now?"""
        return self._probes[link.kind](link.address, timeout)

    # -- teardown -----------------------------------------------------------------------

    def teardown(self) -> None:
        """Delete every proxy this topology created (one already gone is fine)."""
        failures: list[ToxiproxyError] = []
        for name in list(self._links):
            try:
                self.client.delete_proxy(name)
            except NotFound:
                pass
            except ToxiproxyError as exc:
                failures.append(exc)
                continue
            del self._links[name]
        if failures:
            raise ExceptionGroup("proxies left behind by the topology", failures)
