"""Thousands of hostile connections to a real node (harness/hostile), each sending one
input of tests/amqp/test_hostile_fuzz.py's classes over a real socket, while a
well-behaved aio-pika client publishes with confirms and consumes on its own
connection. The node must log no traceback, answer every input as its class requires
(a connection.close with the class's code and a reply text, our protocol header, ...),
and serve the well-behaved client all along: every publish confirmed, every message
back, in every tenth of the run."""

from __future__ import annotations

import asyncio
from collections import Counter

from harness.hostile.inputs import Generator
from harness.hostile.live import campaign
from harness.hostile.tally import outcome
from tests.node.helpers import (
    NodeFactory,
    assert_no_traceback,
    assert_node_serves,
    start_node,
)

SEED = 20261128
CONNECTIONS = 2000
CONCURRENCY = 24


def test_thousands_of_hostile_connections_while_a_client_is_served(
        node_factory: NodeFactory) -> None:
    node = start_node(node_factory)
    generator = Generator(SEED)
    inputs = [generator.input(index) for index in range(CONNECTIONS)]
    results, polite = asyncio.run(campaign(node.host, node.amqp_port, inputs, CONCURRENCY,
                                           node.amqp_url))

    wrong = [r for r in results if r.problems]
    assert not wrong, "\n".join(f"{r.hostile.label}: {r.problems}" for r in wrong[:10])
    assert_no_traceback(node)

    assert not polite.problems, polite.problems
    assert polite.published and polite.confirmed == len(polite.published)
    assert polite.delivered == polite.published
    assert polite.tenths_served(CONNECTIONS) == set(range(10)), polite.progress_at_confirm

    outcomes = Counter(outcome(r.answer, r.closed) for r in results)
    for code in (403, 501, 502, 503, 504, 505, 530):
        assert outcomes[f"connection.close {code}"] > 0, outcomes
    assert outcomes["protocol header"] > 0 and outcomes["channel.close 406"] > 0, outcomes
    assert_node_serves(node)
