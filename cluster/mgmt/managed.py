"""What the management API needs of the node it serves.

The node (`cluster.node.Node`) starts the API with itself, so the API knows it only
through these protocols: it imports none of the node's shell.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from cluster.config import NodeConfig
from cluster.definitions import DefinitionsFile
from cluster.ha.coordinator import Coordinator
from cluster.peer.links import PeerNetwork
from cluster.session.broker import Broker
from cluster.session.connection import Connection


class Listeners(Protocol):
    """Where the node listens: the API reports it."""

    @property
    def host(self) -> str: ...

    @property
    def amqp_port(self) -> int: ...

    @property
    def mgmt_port(self) -> int | None: ...


class ManagedNode(Protocol):
    @property
    def settings(self) -> Listeners: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def definitions(self) -> DefinitionsFile:
        """Read while the app is stopped (its users); awaited after a write."""

    @property
    def broker(self) -> Broker | None:
        """None while the app is stopped."""

    @property
    def coordinator(self) -> Coordinator | None: ...

    @property
    def peers(self) -> PeerNetwork | None: ...

    @property
    def transports(self) -> Mapping[Connection, asyncio.Transport]: ...

    def flush(self) -> None:
        """Write what the broker queued (replies, closes, cancels)."""

    def pump(self) -> None:
        """After a write: the broker's end-of-batch work, then `flush`."""

    async def stop_app(self) -> None: ...

    async def start_app(self) -> None: ...
