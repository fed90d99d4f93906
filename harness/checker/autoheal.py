"""``autoheal-wrong-side``: under ``autoheal``, a node restarted on the side that wins.

After a partition heals, autoheal restarts the side with fewer nodes (a tie: the side
without the first node by name), so its mirrors rejoin the winners' queues empty
(README "Partitions"). A node's ``restart`` report is matched to the partition of the
harness's record that ended last before it, at most ``window`` seconds earlier; a
node on that partition's winning side must not restart: it drops what its side
confirmed while the sides were apart (whether a message is then lost depends on which
winner still holds it). A report is judged only when that partition was one the nodes
could detect, parted the cluster in exactly two sides, and no other fault came between
its start and the report (a crash or another cut changes the sides each node sees).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.record import detected
from harness.checker.result import Fault, Result
from harness.checker.run import Run
from harness.history.model import PARTITION_FAULT, Event

WINDOW_S = 15.0  # a loser restarts once it hears the other side: seconds after the heal


class AutohealWrongSide(Streaming):
    name = "autoheal-wrong-side"

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s

    def start(self, run: Run) -> Observer:
        return _Restarts(run, self.window_s)


class _Restarts:
    def __init__(self, run: Run, window_s: float) -> None:
        self.run = run
        self.window = window_s
        self.reports: list[tuple[float, str]] = []  # (time, node)

    def handlers(self) -> Mapping[str, Handler]:
        return {"restart": self.restart}

    def restart(self, ev: Event) -> None:
        if ev.node is not None:
            self.reports.append((ev.time, ev.node))

    def finish(self) -> Result:
        run = self.run
        timeline, header = run.timeline, run.header
        wrong = Grouper()
        unjudged = 0
        if header.partition_handling == "autoheal":
            faults = [f for f in timeline.faults() if f.applied]
            for time, node in self.reports:
                partition = _healed_before(faults, time, self.window)
                sides = None if partition is None else _sides(partition, header.nodes)
                if (partition is None or sides is None or not detected(partition, faults)
                        or any(f.id != partition.id and f.overlaps(partition.start, time)
                               for f in faults)):
                    unjudged += 1
                    continue
                winners = _winners(*sides)
                if node in winners:
                    wrong.add("autoheal-wrong-side", node,
                              f"{node} restarted after the partition healed, but its side "
                              f"{sorted(winners)} wins under autoheal (the smaller side "
                              f"restarts; a tie: the side without the first node)",
                              partition.start, time)
        counts = {"autoheal_wrong_side": len(wrong), "restarts_unjudged": unjudged}
        return Result(AutohealWrongSide.name, not wrong, counts, wrong.anomalies(timeline))


def _healed_before(faults: Sequence[Fault], time: float, window: float) -> Fault | None:
    """The partition that ended last at or before ``time``, if within ``window``."""
    ended = [f for f in faults if f.kind == PARTITION_FAULT and f.end is not None
             and f.end <= time]
    last = max(ended, key=lambda f: f.end or 0.0, default=None)
    return last if last is not None and time - (last.end or 0.0) <= window else None


_Sides = tuple[frozenset[str], frozenset[str]]


def _sides(partition: Fault, nodes: tuple[str, ...]) -> _Sides | None:
    """The two sides a partition parted the nodes into; None for any other shape (a
    one-way cut, a bridge node hearing both sides)."""
    grudge: Mapping[str, list[str]] = partition.detail.get("grudge") or {}
    if not grudge:
        inside = frozenset(partition.targets)
        outside = frozenset(nodes) - inside
        return (inside, outside) if inside and outside else None
    apart = {n: {m for m in nodes if m in grudge.get(n, ()) or n in grudge.get(m, ())}
             for n in nodes}
    side = frozenset(n for n in nodes if n not in apart[nodes[0]])
    other = frozenset(nodes) - side
    whole = all(apart[n] == (other if n in side else side) for n in nodes)
    return (side, other) if other and whole else None


def _winners(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    if len(a) != len(b):
        return a if len(a) > len(b) else b
    return a if min(a | b) in a else b
