"""A node's partition handling fed its failure detector's real outputs: what its cluster
layer is told, and when the node restarts its app instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.core.broker import BrokerConfig
from cluster.ha.coordinator import Coordinator
from cluster.node import Node
from cluster.peer.detector import FailureDetector, Output, PeerDown, PeerLost, PeerUp
from cluster.session.broker import Broker
from tests.cluster.standalone import three_node

ALL = ["n1", "n2", "n3"]


def linked(tmp_path: Path, handling: str) -> tuple[Node, list[object]]:
    """n1 with n2 and n3 up and serving, its cluster layer running, and the app
    changes it schedules recorded instead of run."""
    node = three_node(tmp_path, "n1", handling)
    node.coordinator = Coordinator(Broker(BrokerConfig()), "n1", "i1", ["n2", "n3"])
    changes: list[object] = []
    node._app_change = changes.append  # type: ignore[method-assign,assignment]
    for peer in ("n2", "n3"):
        feed(node, node_detector(node).heard(peer, "i-" + peer, True, ALL, now=0.0))
    assert sorted(node.coordinator.running) == ["n2", "n3"]
    return node, changes


def node_detector(node: Node) -> FailureDetector:
    assert node.peers is not None
    return node.peers.detector


def feed(node: Node, outputs: list[Output]) -> list[Output]:
    """Pass the detector's events to the node, as its links do; return them."""
    events = [o for o in outputs if isinstance(o, PeerUp | PeerDown | PeerLost)]
    for event in events:
        node._peer_event(event)
    return events


def test_pause_minority_restarts_the_app_when_a_peer_is_back_before_its_loss_settled(
        tmp_path: Path) -> None:
    """The link to n2 drops and n2 redials before n3 says whether it still hears n2:
    messages between n1 and n2 may have been lost meanwhile (a delivery to a consumer
    on n2, its ack or cancel), and n1's cluster layer never heard of a loss. n1 must
    start afresh, so that its peers drop what they held for it."""
    node, changes = linked(tmp_path, "pause_minority")
    detector = node_detector(node)
    assert feed(node, detector.link_closed("n2", now=1.0)) == [
        PeerDown("n2", "connection closed")]
    assert node.coordinator is not None and "n2" in node.coordinator.running  # deferred
    back = feed(node, detector.heard("n2", "i-n2", True, ALL, now=1.3))
    assert back == [PeerUp("n2", "i-n2", False, True, unsettled=True)]
    assert changes == [node._restart_app]


def test_pause_minority_tells_a_settled_loss_and_the_return_without_a_restart(
        tmp_path: Path) -> None:
    node, changes = linked(tmp_path, "pause_minority")
    detector = node_detector(node)
    coordinator = node.coordinator
    assert coordinator is not None
    feed(node, detector.link_closed("n2", now=1.0))
    assert feed(node, detector.answered("n3", "n2", False)) == [PeerLost("n2")]
    assert "n2" not in coordinator.running  # told once settled
    feed(node, detector.heard("n2", "i-n2", True, ALL, now=1.3))
    assert "n2" in coordinator.running and changes == []


@pytest.mark.parametrize("handling", ["ignore", "autoheal"])
def test_other_modes_tell_the_loss_at_once_and_restart_for_no_unsettled_return(
        tmp_path: Path, handling: str) -> None:
    node, changes = linked(tmp_path, handling)
    detector = node_detector(node)
    assert node.coordinator is not None
    feed(node, detector.link_closed("n2", now=1.0))
    assert "n2" not in node.coordinator.running
    feed(node, detector.heard("n2", "i-n2", True, ALL, now=1.3))
    assert changes == []  # the sides stay apart (ignore) or autoheal's tie: n1 wins
