"""Node reports for a real RabbitMQ, which writes none: each node's management API,
polled while the run goes on, turned into the lines our own broker writes to its event
log (cluster/events.py; "Node reports" in docs/history-format.md). The endpoints name
nodes as the harness does (`RabbitManagement` reads ``rabbit@n1`` as ``n1``).

Theory of operation. A `NodeWatch` keeps what one node last showed of itself: per queue
of ``GET /api/queues/%2F`` its master (``node``), its mirrors (``slave_nodes``) and the
synchronised ones (``synchronised_slave_nodes``), and the peers of its own ``partitions``
in ``GET /api/nodes``. Each new listing is compared with the last one and every change
becomes an event line of cluster/events.py's schema; the first listing is only the
baseline. Three nodes polled would report one promotion three times, so a node reports
only what is about itself, seen in its own listing:

* ``promotion`` (``queue``, ``member``: itself): it is now the master of a queue whose
  master was another node;
* ``mirror_added`` (``queue``, ``member``: itself): it is now among the queue's mirrors,
  also of a queue listed for the first time after the baseline (our broker reports a new
  queue's mirrors the same way);
* ``mirror_dropped`` (``queue``, ``member``: itself, no ``reason``): it left the mirrors
  and is not the master (a mirror that became the master reports the promotion only);
* ``mirror_synchronised`` (``queue``, ``member``: itself): it is now among the
  synchronised mirrors, whether by an explicit sync or by draining. This is our broker's
  report of one mirror's sync, which the checker reads as that mirror's alone
  (harness/checker/timeline.py). A ``sync_end`` is not written: the checker reads every
  completed ``sync-end`` as *every* mirror of the queue synchronised, more than the
  listing shows, and the membership replay would then expect a still unsynchronised
  mirror to hold every message;
* ``partition_detected`` / ``partition_healed`` (``peer``): its ``partitions`` list gained
  / lost that peer (RabbitMQ keeps a peer there until the node recovers from the
  partition: under ``ignore``, until a restart).

A queue missing from a listing reports nothing and is forgotten: listed again, it is a
new queue (a queue deleted and declared elsewhere is not a promotion). A node that does
not answer keeps its last listing, so a change while it was away is reported when it
answers again, dated then. Every record is dated when the listing came back, later
than the change, so no sync is claimed before the mirror held what its master held.
A queue's ``state`` is not read: its master is the listed ``node`` in any state.
A promotion carries no ``previous`` nor ``synchronised``: the listing before may be
several changes old,
and a ``previous`` that does not match the checker's replay would spare the report
from being judged (harness/checker/promotions.py).

Left out: ``sync_start`` and a cancelled ``sync_end`` (a listing shows a sync at best
while one is running, not when it began or that it was cancelled: the mirror simply
stays unsynchronised), and ``restart`` (an uptime reset tells a restart happened, not
that autoheal made it; a restart the harness did itself would be blamed on autoheal).
A queue deleted and declared again between two polls looks like the same queue.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import events
from faults.management import Management, ManagementError

VHOST = "/"  # the only virtual host the harness uses, and the one listed


@dataclass(frozen=True)
class QueueView:
    master: str | None
    mirrors: frozenset[str]
    synchronised: frozenset[str]

    @classmethod
    def of(cls, listed: Mapping[str, Any]) -> QueueView:
        """One entry of ``GET /api/queues/%2F``; unmirrored queues list no mirror keys."""
        return cls(listed.get("node") or None, frozenset(listed.get("slave_nodes") or ()),
                   frozenset(listed.get("synchronised_slave_nodes") or ()))


@dataclass(frozen=True)
class NodeView:
    queues: Mapping[str, QueueView]
    partitions: frozenset[str]


class NodeWatch:
    """What one node's listings say about itself, as event records (I/O-free)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.last: NodeView | None = None

    def observe(self, queues: list[dict[str, Any]], partitions: list[str], mono: float,
                wall: float) -> list[dict[str, Any]]:
        """The records for what changed since the last listing. ``queues``: the node's
        ``GET /api/queues/%2F``; ``partitions``: its own ``partitions`` from
        ``GET /api/nodes``."""
        view = NodeView({q["name"]: QueueView.of(q) for q in queues}, frozenset(partitions))
        before, self.last = self.last, view
        if before is None:
            return []  # the baseline: what already holds is no news
        changes: list[events.NodeEvent] = [
            events.PartitionDetected(peer=peer)
            for peer in sorted(view.partitions - before.partitions)]
        changes += [events.PartitionHealed(peer=peer)
                    for peer in sorted(before.partitions - view.partitions)]
        for name, now in view.queues.items():
            changes += self._queue_changes(name, before.queues.get(name), now)
        return [events.line(event, self.node, mono, wall) for event in changes]

    def _queue_changes(self, queue: str, was: QueueView | None,
                       now: QueueView) -> list[events.NodeEvent]:
        me = self.node
        if was is None:  # listed for the first time: nothing was, no master either
            was = QueueView(None, frozenset(), frozenset())
        changes: list[events.NodeEvent] = []
        if now.master == me and was.master not in (None, me):
            changes.append(events.Promotion(vhost=VHOST, queue=queue, member=me))
        if me in now.mirrors and me not in was.mirrors:
            changes.append(events.MirrorAdded(vhost=VHOST, queue=queue, member=me))
        elif me in was.mirrors and me not in now.mirrors and now.master != me:
            changes.append(events.MirrorDropped(vhost=VHOST, queue=queue, member=me))
        if me in now.synchronised and me not in was.synchronised:
            changes.append(events.MirrorSynchronised(vhost=VHOST, queue=queue, member=me))
        return changes


class EventPoller:
    """Polls every node every ``interval`` seconds, each in a thread of its own (a node
    that hangs until its calls time out delays no other node's reports), and appends
    the records of its `NodeWatch` to its file in ``paths``, one flushed JSON line
    each. A node that does not answer is skipped that round; any other error is kept
    in ``errors`` (once each) and the polling goes on."""

    def __init__(self, endpoints: Mapping[str, Management], paths: Mapping[str, Path],
                 interval: float = 0.25) -> None:
        self.errors: list[str] = []
        self.interval = interval
        self._endpoints = dict(endpoints)
        self._paths = {node: paths[node] for node in endpoints}
        self.watches = {node: NodeWatch(node) for node in endpoints}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        if self._threads:
            return
        self._stopping.clear()
        self._threads = [threading.Thread(target=self._watch, args=(node,), daemon=True,
                                          name=f"rabbitmq-events-{node}")
                         for node in self._endpoints]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop and join the threads (a call in flight runs to its timeout first)."""
        self._stopping.set()
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()

    def _watch(self, node: str) -> None:
        while not self._stopping.is_set():
            try:
                self._poll(node)
            except ManagementError:
                pass  # down, paused or cut off: its watch waits for its next answer
            except Exception as exc:  # the run goes on without this node's reports
                error = f"{node}: {exc!r}"
                if error not in self.errors:  # once each: it may recur every round
                    self.errors.append(error)
            self._stopping.wait(self.interval)

    def _poll(self, node: str) -> None:
        api = self._endpoints[node]
        queues = api.call("GET", "/api/queues/%2F")
        entries = {entry["name"]: entry for entry in api.call("GET", "/api/nodes")}
        if node not in entries:
            raise ValueError(f"/api/nodes does not list {node} itself")
        watch = self.watches[node]
        # RabbitMQ lists a node's partitions only once it has its statistics (not in
        # the first seconds after a start): until then, what it last said holds.
        listed = entries[node].get("partitions")
        partitions = list(listed) if listed is not None \
            else sorted(watch.last.partitions) if watch.last is not None else []
        records = watch.observe(queues, partitions, time.monotonic(), time.time())
        if records:
            path = self._paths[node]
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as out:
                out.writelines(json.dumps(record) + "\n" for record in records)
