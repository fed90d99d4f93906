"""What every input class builds on: the handshake prefixes and their answers, the
broker's limits, and a class's output (stage, bytes, answer due).

The prefix is delivered (and, on a socket, answered) before the hostile bytes. Frames
are held to 4096 bytes until tune-ok and to the frame_max it chose after it, as in
RabbitMQ.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from cluster.core.broker import BrokerConfig
from cluster.session.handshake import FRAME_MIN_SIZE
from harness.hostile import wire
from harness.hostile.expect import CHANNEL_CLOSE, CLOSE, Expect, Reply

STAGES = ("header", "start_ok", "tune_ok", "open")
# The broker's answers to each handshake prefix.
STAGE_REPLIES: dict[str, tuple[Reply, ...]] = {
    "none": (),
    "header": ((0, "Connection.Start"),),
    "start_ok": ((0, "Connection.Start"), (0, "Connection.Tune")),
    "tune_ok": ((0, "Connection.Start"), (0, "Connection.Tune")),
    "open": ((0, "Connection.Start"), (0, "Connection.Tune"), (0, "Connection.OpenOk"),
             (1, "Channel.OpenOk")),
}
PROBE_CHANNEL = 9


@dataclass(frozen=True)
class Limits:
    """The broker's configured limits (a node's defaults unless told otherwise)."""

    frame_max: int = BrokerConfig.frame_max
    channel_max: int = BrokerConfig.channel_max
    max_message_size: int = BrokerConfig.max_message_size


@dataclass
class Context:
    rng: random.Random
    limits: Limits
    name: str  # for the queues and exchanges this input declares
    frame_max: int  # what its tune-ok asks for (0: the broker's)

    @property
    def negotiated(self) -> int:
        return self.frame_max or self.limits.frame_max

    def limit(self, stage: str) -> int:
        """The largest frame the broker takes after ``stage``."""
        return self.negotiated if stage in ("tune_ok", "open") else FRAME_MIN_SIZE

    def prefix(self, stage: str) -> bytes:
        return handshake(stage, self.frame_max)


@lru_cache(maxsize=64)
def handshake(stage: str, frame_max: int) -> bytes:
    """The client's half of the handshake up to ``stage``."""
    steps = [wire.PROTOCOL_HEADER, wire.start_ok(), wire.tune_ok(frame_max),
             wire.connection_open() + wire.channel_open(1)]
    count = {"none": 0, "header": 1, "start_ok": 2, "tune_ok": 3, "open": 4}[stage]
    return b"".join(steps[:count])


@dataclass(frozen=True)
class Built:
    """One class's output: the stage its bytes follow, the bytes, the answer due."""

    stage: str
    data: bytes
    expect: Expect


Builder = Callable[[Context], Built]


def close(stage: str, data: bytes, code: int, text: str) -> Built:
    return Built(stage, data, Expect(CLOSE, code, text))


def after_handshake(rng: random.Random) -> str:
    return rng.choice(STAGES)


def probed(data: bytes, code: int, text: str) -> Built:
    """A channel error: channel 1 closes, then a new channel must still open."""
    probe = wire.channel_open(PROBE_CHANNEL)
    return Built("open", data + probe, Expect(CHANNEL_CLOSE, code, text,
                                              ((PROBE_CHANNEL, "Channel.OpenOk"),)))
