"""A node's app as it stops: in-process, with its real store and definitions on disk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cluster.peer.codec import Envelope
from tests.cluster.standalone import three_node

EXCHANGE = {"key": ["exchange", "/", "x.late"], "version": [1, "n2"],
            "value": {"type": "direct", "durable": True, "auto_delete": False,
                      "internal": False, "arguments": {}}}


async def test_a_stopping_app_takes_no_more_cluster_input(tmp_path: Path) -> None:
    """A peer's metadata that arrives while the app is at its last commit is not acted
    on: what the app took in then (a publish it orders and its peers confirm, a record
    it saves) would be lost or half done once the store closes."""
    node = three_node(tmp_path, "n1", "pause_minority")
    await node.start_app()
    assert node.coordinator is not None
    node.coordinator.peer_up("n2", "i-n2")
    stopping = asyncio.create_task(node.stop_app())
    await asyncio.sleep(0)  # the stop is under way, awaiting its last commit
    assert node.broker is not None
    node._peer_message("n2", Envelope("meta", {}, json.dumps([EXCHANGE]).encode()))
    await stopping
    await node.start_app()  # its definitions come back from its disk
    assert node.broker is not None
    assert "x.late" not in node.broker.vhosts["/"].exchanges
    await node.stop_app()
