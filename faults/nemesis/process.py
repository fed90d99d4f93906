"""Process faults through a `ProcessControl`: SIGKILL, power loss (SIGKILL, then the
writes not fsynced are lost), graceful stop, pause and resume, start, restart (the node
rejoins with its data), rolling restart.

``nodes`` in an op's value picks the targets (see `targets.select`); resume and start
default to the nodes this nemesis paused or took down, which is also what ``heal``
brings back: together, or with ``stagger`` in its value one at a time in the order they
went down, that many seconds apart (a full-cluster restart in the wrong order: the node
that stopped first must wait at start-up for the one that stopped last). With a
`ClusterView`, restarts wait until the other running nodes see the node again, so a
rolling restart never has two nodes away at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from faults.process import (
    ProcessControl,
    ProcessControlError,
    ProcessState,
    ProcessStateError,
)

from . import targets
from .core import HEAL, InvalidOp, Op, option, require
from .view import ClusterView, wait_seen

Action = Callable[[str], None]


class ProcessNemesis:
    fs = frozenset({"kill", "power-loss", "stop", "pause", "resume", "start", "restart",
                    "rolling-restart", HEAL})

    def __init__(self, control: ProcessControl, rng: random.Random, *,
                 view: ClusterView | None = None, stop_timeout: float = 10.0,
                 rejoin_timeout: float = 30.0) -> None:
        self.control = control
        self.rng = rng
        self.view = view
        self.stop_timeout = stop_timeout
        self.rejoin_timeout = rejoin_timeout
        self.down: dict[str, None] = {}  # killed or stopped by us, in that order
        self.paused: set[str] = set()

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        actions: dict[str, tuple[str, Action]] = {
            "kill": ("one", self._kill),
            "stop": ("one", self._stop),
            "pause": ("one", self._pause),
            "restart": ("one", self._restart),
            "rolling-restart": ("all", self._restart),
        }
        if op.f == HEAL:
            return self._heal(op)
        if op.f == "resume":
            return self._each(op, self._chosen(op, sorted(self.paused)), self._resume)
        if op.f == "start":
            return self._each(op, self._chosen(op, sorted(self.down)), self._start)
        if op.f == "power-loss":
            return self._power_loss(op, targets.select(option(op, "nodes", "one"),
                                                       self.control.nodes(), self.rng))
        default, action = actions[op.f]
        nodes = targets.select(option(op, "nodes", default), self.control.nodes(), self.rng)
        # A rolling restart stops at the first node that does not come back.
        return self._each(op, nodes, action, stop_at_failure=op.f == "rolling-restart")

    def teardown(self) -> None:
        result = self._heal(Op(HEAL))
        if result.type != "ok":
            raise ProcessControlError(result.error or "nodes not brought back")

    def _chosen(self, op: Op, default: list[str]) -> list[str]:
        spec = option(op, "nodes")
        return default if spec is None else targets.select(spec, self.control.nodes(), self.rng)

    # -- one node -----------------------------------------------------------------------

    def _kill(self, node: str) -> None:
        self.control.kill(node)
        self.down[node] = None
        self.paused.discard(node)

    def _power_loss(self, op: Op, nodes: list[str]) -> Op:
        """Every node at one moment (`ProcessControl.power_loss`)."""
        running = {n for n in nodes if self.control.state(n) is not ProcessState.STOPPED}
        error: str | None = None
        try:
            self.control.power_loss(nodes)
        except (ProcessControlError, ProcessStateError) as exc:
            error = str(exc)
        # Killed even if losing the writes then failed: heal must start them again.
        down = [n for n in nodes if self.control.state(n) is ProcessState.STOPPED]
        for node in down:
            self.down[node] = None
            self.paused.discard(node)
        if error is None:
            return _outcome(op, list(nodes), {})
        killed = [n for n in down if n in running]
        return _outcome(op, killed, {n: error for n in nodes if n not in killed})

    def _stop(self, node: str) -> None:
        self.control.stop(node, self.stop_timeout)
        self.down[node] = None
        self.paused.discard(node)

    def _pause(self, node: str) -> None:
        self.control.pause(node)
        self.paused.add(node)

    def _resume(self, node: str) -> None:
        self.control.resume(node)
        self.paused.discard(node)

    def _start(self, node: str) -> None:
        self.control.start(node)
        self.down.pop(node, None)

    def _restart(self, node: str) -> None:
        self._stop(node)
        self._start(node)
        if self.view is not None:
            observers = [n for n in self.control.nodes()
                         if self.control.state(n) is ProcessState.RUNNING]
            missing = wait_seen(self.view, node, observers, self.rejoin_timeout)
            if missing:
                raise ProcessControlError(
                    f"{node} restarted but {missing} did not see it within "
                    f"{self.rejoin_timeout:g}s")

    # -- many ---------------------------------------------------------------------------

    def _each(self, op: Op, nodes: list[str], action: Action, *,
              stop_at_failure: bool = False) -> Op:
        done: list[str] = []
        failed: dict[str, str] = {}
        for node in nodes:
            try:
                action(node)
            except (ProcessControlError, ProcessStateError) as exc:
                failed[node] = str(exc)
                if stop_at_failure:
                    break
                continue
            done.append(node)
        return _outcome(op, done, failed)

    def _heal(self, op: Op) -> Op:
        """Bring every node we paused or took down back to running, by what its state
        is now (a node someone else already brought back needs nothing). Stopped nodes
        start together, as a cluster boots: a node waits at start-up for the peers it
        last ran with, so after a kill or power loss of all, one at a time never ends;
        with ``stagger``, each starts that long after the one that went down before it."""
        stagger = option(op, "stagger", 0.0)
        if not isinstance(stagger, int | float) or isinstance(stagger, bool) or stagger < 0:
            raise InvalidOp(f"heal: stagger must be a number of seconds >= 0, got {stagger!r}")
        resumed: list[str] = []
        to_start: list[str] = []
        failed: dict[str, str] = {}
        for node in [*sorted(self.paused - set(self.down)), *self.down]:
            try:
                state = self.control.state(node)
                if state is ProcessState.PAUSED:
                    self.control.resume(node)
                    resumed.append(node)
                elif state is ProcessState.STOPPED:
                    to_start.append(node)
                    continue
            except (ProcessControlError, ProcessStateError) as exc:
                failed[node] = str(exc)
                continue
            self.paused.discard(node)
            self.down.pop(node, None)
        started: list[str] = []
        for node, error in self._start_together(to_start, float(stagger)).items():
            if error is None:
                started.append(node)
            else:
                failed[node] = error
        value = {"resumed": resumed, "started": started, "failed": dict(sorted(failed.items()))}
        if failed:
            return op.fail(f"nodes not brought back: {failed}", value)
        return op.ok(value)

    def _start_together(self, nodes: list[str], stagger: float = 0.0) -> dict[str, str | None]:
        """Start each node on a thread of its own, the i-th ``i * stagger`` seconds
        after the first; per node, the error or None."""
        def start(node: str) -> str | None:
            time.sleep(nodes.index(node) * stagger)
            try:
                self._start(node)
            except (ProcessControlError, ProcessStateError) as exc:
                return str(exc)
            return None

        if not nodes:
            return {}
        with ThreadPoolExecutor(len(nodes)) as pool:
            return dict(zip(nodes, pool.map(start, nodes), strict=True))


def _outcome(op: Op, done: list[str], failed: dict[str, str]) -> Op:
    """ok when every node was done, fail when none was, info in between."""
    value = {"nodes": done, "failed": failed}
    if not failed:
        return op.ok(value)
    if not done:
        return op.fail(f"{op.f} failed: {failed}", value)
    return op.info(f"{op.f} failed on some nodes: {failed}", value)
