"""The mirrored-queue cases of RabbitMQ's HA test suites, as plain functions.

Each case drives real pika clients against a running cluster, injects its fault
through a `ProcessControl`, and returns an outcome whose ``problems()`` lists every
way the broker broke the design's promise (empty: it kept it). Tests assert on the
outcome; the harness can run the same cases as scenarios.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pika
import pika.exceptions

from faults.process.control import ProcessControl

Fault = str  # "kill" (SIGKILL) or "stop" (graceful)


@dataclass(frozen=True)
class NodeAccess:
    amqp_url: str
    mgmt_url: str


def management(node: NodeAccess, path: str, method: str = "GET",
               body: object | None = None) -> object:
    request = urllib.request.Request(
        node.mgmt_url + path, method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
                 "content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read()
    return json.loads(text) if text else None


def queue_info(node: NodeAccess, queue: str) -> dict[str, object]:
    found = management(node, f"/api/queues/%2F/{queue}")
    assert isinstance(found, dict)
    return found


def mirror_all(node: NodeAccess, pattern: str = "^ha\\.") -> None:
    management(node, "/api/policies/%2F/ha-all", "PUT",
               {"pattern": pattern, "definition": {"ha-mode": "all"}})


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")


def declare_mirrored(nodes: Mapping[str, NodeAccess], master: str, queue: str) -> None:
    """Declare ``queue`` on ``master`` and wait until every node mirrors it, in sync."""
    mirror_all(nodes[master])
    connection = pika.BlockingConnection(pika.URLParameters(nodes[master].amqp_url))
    connection.channel().queue_declare(queue, durable=True)
    connection.close()
    others = sorted(n for n in nodes if n != master)
    wait_for(lambda: synchronised_mirrors(nodes[master], queue) == others,
             f"{queue} mirrored in sync on {others}")


def synchronised_mirrors(node: NodeAccess, queue: str) -> list[str]:
    names = queue_info(node, queue)["synchronised_slave_nodes"]
    assert isinstance(names, list)
    return sorted(names)


def _fail(control: ProcessControl, node: str, fault: Fault) -> None:
    if fault == "kill":
        control.kill(node)
    elif fault == "stop":
        control.stop(node, timeout=10.0)
    else:
        raise ValueError(f"unknown fault {fault!r}: expected 'kill' or 'stop'")


@dataclass
class Deliveries:
    """What one consumer saw: bodies with their redelivered flags, cancels."""

    seen: list[tuple[bytes, bool]] = field(default_factory=list)
    cancelled: int = 0

    def problems(self, published: list[bytes], confirmed: list[bytes]) -> list[str]:
        out = []
        first: dict[bytes, bool] = {}
        for body, redelivered in self.seen:
            if body in first and not redelivered:
                out.append(f"{body!r} delivered again without redelivered=true")
            first.setdefault(body, redelivered)
        lost = [m for m in confirmed if m not in first]
        if lost:
            out.append(f"{len(lost)} confirmed messages never delivered: {lost[:5]}")
        order = {body: i for i, body in enumerate(published)}
        fresh = [order[b] for b, redelivered in self.seen if not redelivered and b in order]
        if fresh != sorted(fresh):
            out.append("first deliveries out of publish order")
        unknown = [b for b in first if b not in order]
        if unknown:
            out.append(f"delivered messages never published: {unknown[:5]}")
        return out


@dataclass
class ConfirmsOutcome:
    published: list[bytes]
    confirmed: list[bytes]
    deliveries: Deliveries
    longest_confirm_gap: float

    def problems(self) -> list[str]:
        out = self.deliveries.problems(self.published, self.confirmed)
        if len(self.confirmed) != len(self.published):
            out.append(f"only {len(self.confirmed)} of {len(self.published)} publishes "
                       "confirmed")
        return out


def _consume(url: str, queue: str, into: Deliveries, until: threading.Event,
             arguments: dict[str, object] | None = None, prefetch: int = 20) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=prefetch)

    def on_message(ch: object, method: object, properties: object, body: bytes) -> None:
        into.seen.append((body, bool(method.redelivered)))  # type: ignore[attr-defined]
        channel.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]

    def on_cancel(frame: object) -> None:
        into.cancelled += 1
        channel.basic_consume(queue, on_message)  # come back, as a client would

    channel.add_on_cancel_callback(on_cancel)
    channel.basic_consume(queue, on_message, arguments=arguments)
    while not until.is_set():
        connection.process_data_events(0.05)
    connection.close()


def _drain_into(url: str, queue: str, into: Deliveries, idle: float = 1.0) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < idle:
        method, _, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            time.sleep(0.05)
            continue
        into.seen.append((body, bool(method.redelivered)))
        quiet_since = time.monotonic()
    connection.close()


def confirms_survive(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                     master: str, publisher: str, consumer: str, fault: Fault,
                     queue: str = "ha.confirms", messages: int = 600,
                     fault_at: int = 200) -> ConfirmsOutcome:
    """RabbitMQ's confirms-survive-kill/stop: a publisher with confirms on one mirror,
    a consumer on another, the master fails partway. Every publish must be confirmed
    and every confirmed message delivered."""
    declare_mirrored(nodes, master, queue)
    deliveries = Deliveries()
    done = threading.Event()
    consumer_thread = threading.Thread(
        target=_consume, args=(nodes[consumer].amqp_url, queue, deliveries, done))
    consumer_thread.start()
    published, confirmed = [], []
    longest = 0.0
    try:
        connection = pika.BlockingConnection(pika.URLParameters(nodes[publisher].amqp_url))
        channel = connection.channel()
        channel.confirm_delivery()
        last = time.monotonic()
        for i in range(messages):
            if i == fault_at:
                _fail(control, master, fault)
            body = f"m{i}".encode()
            published.append(body)
            try:
                channel.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
            except pika.exceptions.NackError:
                continue
            confirmed.append(body)
            now = time.monotonic()
            longest, last = max(longest, now - last), now
        connection.close()
        wait_for(lambda: len({b for b, _ in deliveries.seen}) >= len(confirmed),
                 "the consumer to see every confirmed message", timeout=20)
    except TimeoutError:
        pass  # the outcome reports what is missing
    finally:
        done.set()
        consumer_thread.join()
    return ConfirmsOutcome(published, confirmed, deliveries, longest)


@dataclass
class ConsumerOutcome:
    published: list[bytes]
    deliveries: Deliveries
    cancel_on_failover: bool
    left_in_queue: int  # after every client is gone: held back, never to be delivered

    def problems(self) -> list[str]:
        out = self.deliveries.problems(self.published, self.published)
        if self.left_in_queue:
            out.append(f"{self.left_in_queue} messages left in the queue after the drain")
        if self.cancel_on_failover and self.deliveries.cancelled != 1:
            out.append(f"x-cancel-on-ha-failover: {self.deliveries.cancelled} cancels, "
                       "expected 1")
        if not self.cancel_on_failover and self.deliveries.cancelled:
            out.append(f"consumer cancelled {self.deliveries.cancelled} times without "
                       "asking for x-cancel-on-ha-failover")
        return out


def consumer_survives(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                      master: str, consumer: str, fault: Fault, cancel_on_failover: bool,
                      queue: str = "ha.consume", messages: int = 500) -> ConsumerOutcome:
    """RabbitMQ's consume-survives-kill/stop and auto-resume: a slow acking consumer on
    a mirror while the master fails. It must go on receiving (after a cancel
    notification when it asked for one); first deliveries keep publish order and
    repeats carry redelivered=true; nothing published is missing at the end."""
    declare_mirrored(nodes, master, queue)
    published = [f"c{i}".encode() for i in range(messages)]
    connection = pika.BlockingConnection(pika.URLParameters(nodes[consumer].amqp_url))
    channel = connection.channel()
    channel.confirm_delivery()
    for body in published:
        channel.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
    connection.close()
    deliveries = Deliveries()
    done = threading.Event()
    arguments = {"x-cancel-on-ha-failover": True} if cancel_on_failover else None
    consumer_thread = threading.Thread(
        target=_consume, args=(nodes[consumer].amqp_url, queue, deliveries, done, arguments, 5))
    consumer_thread.start()
    try:
        wait_for(lambda: len(deliveries.seen) >= messages // 4, "a quarter delivered")
        _fail(control, master, fault)
        wait_for(lambda: len({b for b, _ in deliveries.seen}) >= messages,
                 "every message delivered after the failover", timeout=20)
    except TimeoutError:
        pass
    finally:
        done.set()
        consumer_thread.join()
    _drain_into(nodes[consumer].amqp_url, queue, deliveries, idle=0.5)
    left = queue_info(nodes[consumer], queue)["messages"]
    assert isinstance(left, int)
    return ConsumerOutcome(published, deliveries, cancel_on_failover, left)
