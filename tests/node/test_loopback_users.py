"""guest logs in from loopback addresses only (RabbitMQ's ``loopback_users``), on a real
node listening on every address and reached at one of this machine's own that is not
loopback."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from faults.process.node import NodeProcess
from tests.node.helpers import (
    NodeFactory,
    api,
    config_toml,
    connect,
    ok,
    read_events,
    refused_at_open,
)

ADMIN = {"name": "ops", "password": "pw", "tags": ["administrator"]}


def non_loopback_address() -> str:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: any routed address will do
        except OSError:
            pytest.skip("no default route, so no local address other than loopback")
        return str(probe.getsockname()[0])


def reached_at(node: NodeProcess, host: str) -> NodeProcess:
    """The same node, its clients dialling ``host``."""
    return dataclasses.replace(node, host=host)


def test_guest_is_refused_from_elsewhere_and_admitted_from_loopback(
    node_factory: NodeFactory,
) -> None:
    node = node_factory(host="0.0.0.0", config_text=config_toml(
        users=[ADMIN], permissions=[{"user": "ops"}]))
    outside = reached_at(node, non_loopback_address())

    with refused_at_open(403):
        connect(outside)
    refusals = [event["text"] for event in read_events(node)
                if event["event"] == "connection_error"]
    assert refusals == [
        "ACCESS_REFUSED - PLAIN login refused: user 'guest' can only connect via localhost"]
    answer = api(outside, "GET", "/api/overview")
    assert (answer.status, answer.body) == (401, {
        "error": "not_authorised", "reason": "User can only log in via localhost"})

    # Other users come from anywhere; guest from loopback.
    connect(outside, user="ops", password="pw").close()
    ok(outside, "GET", "/api/overview", user="ops", password="pw")
    connect(reached_at(node, "127.0.0.1")).close()
    ok(reached_at(node, "127.0.0.1"), "GET", "/api/overview")


def test_an_empty_loopback_users_lets_guest_in_from_anywhere(
    node_factory: NodeFactory,
) -> None:
    node = node_factory(host="0.0.0.0", config_text=config_toml(
        node={"loopback_users": []}))
    outside = reached_at(node, non_loopback_address())
    connect(outside).close()
    ok(outside, "GET", "/api/overview")
