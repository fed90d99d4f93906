"""Hypothesis drives broadcasts, time, crashes, joins and partitions through the
simulated network; safety is checked after every step and, once the run has gone
quiet, that everything was delivered where it should be and every ack round ended."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.examples import examples
from tests.gm.simnet import SimNet

MAX_LIVE = 7

pick = st.integers(min_value=0, max_value=1_000)


class GMRing(RuleBasedStateMachine):
    net: SimNet

    @initialize(
        seed=st.integers(min_value=0, max_value=2**32 - 1),
        members=st.integers(min_value=1, max_value=4),
        slow_links=st.booleans(),
        quick_detection=st.booleans(),
        late_views=st.booleans(),
    )
    def start(
        self, seed: int, members: int, slow_links: bool, quick_detection: bool, late_views: bool
    ) -> None:
        # Slow links with quick detection: views change while messages are in flight.
        self.net = SimNet(
            seed,
            members=members,
            delay=(0.01, 20.0 if slow_links else 1.0),
            detect=(0.2, 1.0) if quick_detection else (1.0, 8.0),
            install=(0.0, 15.0 if late_views else 0.5),
        )

    def mortal(self) -> list[str]:
        return sorted(self.net.alive - self.net.doomed)

    @rule(who=pick, count=st.integers(min_value=1, max_value=4))
    def broadcast(self, who: int, count: int) -> None:
        live = sorted(self.net.alive)
        for _ in range(count):
            self.net.broadcast(live[who % len(live)])

    @rule(events=st.integers(min_value=1, max_value=40))
    def run(self, events: int) -> None:
        self.net.run(events)

    @precondition(lambda self: len(self.mortal()) > 1)
    @rule(who=pick)
    def crash(self, who: int) -> None:
        mortal = self.mortal()
        self.net.crash(mortal[who % len(mortal)])

    @precondition(lambda self: len(self.net.alive) < MAX_LIVE)
    @rule()
    def join(self) -> None:
        self.net.join()

    @precondition(lambda self: len(self.net.alive) < MAX_LIVE)
    @rule()
    def join_and_die(self) -> None:
        self.net.crash(self.net.join())

    @precondition(lambda self: len(self.mortal()) > 1)
    @rule(data=st.data(), kill_after=st.floats(min_value=0.0, max_value=10.0))
    def partition(self, data: st.DataObject, kill_after: float) -> None:
        mortal = self.mortal()
        side = data.draw(
            st.lists(st.sampled_from(mortal), min_size=1, max_size=len(mortal) - 1, unique=True)
        )
        self.net.partition(side, kill_after)

    @invariant()
    def safe(self) -> None:
        if hasattr(self, "net"):
            self.net.history.check_safety()

    def teardown(self) -> None:
        if hasattr(self, "net"):
            self.net.check_settled()


GMRing.TestCase.settings = settings(
    max_examples=examples(300),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGMRing = GMRing.TestCase
