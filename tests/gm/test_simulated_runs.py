"""Many seeded runs of a random workload through the simulated network.

Each seed also draws the network's character (slow or fast links, quick or slow failure
detection, views installed promptly or late and out of order) and the workload's mix of
broadcasts, crashes, joins (some dying at once) and partitions. The Hypothesis machine in
test_ring_stateful.py shrinks failures; this sweep covers ground cheaply.
"""

from __future__ import annotations

import random

import pytest

from tests.gm.simnet import SimNet

SEEDS = range(1000)


def random_run(seed: int) -> SimNet:
    """Build and drive a run; the caller checks it."""
    shape = random.Random(f"shape-{seed}")
    net = SimNet(
        seed,
        members=shape.randint(1, 5),
        delay=(0.01, shape.choice([0.5, 2.0, 10.0, 30.0])),
        detect=(0.2, shape.choice([1.0, 8.0, 30.0])),
        install=(0.0, shape.choice([0.01, 4.0, 20.0])),
    )
    weights = [shape.random() for _ in range(6)]
    rng = net.rng
    for _ in range(shape.randint(10, 150)):
        mortal = sorted(net.alive - net.doomed)
        match rng.choices(range(6), weights)[0]:
            case 0:
                for _ in range(rng.randint(1, 5)):
                    net.broadcast(rng.choice(sorted(net.alive)))
            case 1:
                net.run(rng.randint(1, 30))
            case 2 if len(mortal) > 1:
                net.crash(rng.choice(mortal))
            case 3:
                net.join()
            case 4 if len(mortal) > 1:
                side = rng.sample(mortal, rng.randint(1, len(mortal) - 1))
                net.partition(side, kill_after=rng.uniform(0.0, 5.0))
            case 5:
                net.crash(net.join())  # a mirror whose node dies as it starts
    return net


@pytest.mark.parametrize("seed", SEEDS)
def test_random_run_keeps_gm_guarantees(seed: int) -> None:
    random_run(seed).check_settled()
