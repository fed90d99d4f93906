"""What the broker must answer to a hostile input, and the reply codes it may use.

The codes are the ones the README's "Errors as RabbitMQ sends them" lists (named in
cluster/amqp/errors.py). Each input class names the code its fault must get
(tests/amqp/test_hostile_fuzz.py states them all).
"""

from __future__ import annotations

from dataclasses import dataclass

# Endings of a hostile connection.
CLOSE = "close"  # connection.close with `code`
CHANNEL_CLOSE = "channel-close"  # channel.close with `code` on channel 1; the rest goes on
SERVED = "served"  # the input was valid after all: `replies`, no close
WAITING = "waiting"  # the input stops inside a frame or a message: no answer, no close
HEADER = "header"  # not our protocol: our protocol header back, then the socket closes
HANG_UP = "hang-up"  # a refused login from a client that cannot take a connection.close
ANY = "any"  # random bytes: any ending, within the invariants

FRAME_ERROR, SYNTAX_ERROR, COMMAND_INVALID, CHANNEL_ERROR, UNEXPECTED_FRAME = (
    501, 502, 503, 504, 505)
ACCESS_REFUSED, NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED = 403, 404, 405, 406
NOT_ALLOWED, NOT_IMPLEMENTED = 530, 540
# Every connection.close a hostile input may get: the frame and syntax errors, command
# and channel errors, a refused login or malformed login response (403), a refused tune
# or vhost (530), and what the broker does not implement (540). 541 (internal error) and
# 320 (forced) never answer a client's input.
CONNECTION_CODES = frozenset({ACCESS_REFUSED, FRAME_ERROR, SYNTAX_ERROR, COMMAND_INVALID,
                              CHANNEL_ERROR, UNEXPECTED_FRAME, NOT_ALLOWED, NOT_IMPLEMENTED})
# Soft errors close one channel: access, missing or locked entities, failed
# preconditions (a body over max_message_size among them).
CHANNEL_CODES = frozenset({ACCESS_REFUSED, NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED})

Reply = tuple[int, str]  # (channel, pamqp method name), e.g. (1, "Queue.DeclareOk")


@dataclass(frozen=True)
class Expect:
    ending: str
    code: int = 0
    text: str = ""  # what the close's reply text must contain
    replies: tuple[Reply, ...] = ()  # methods the broker must send first, in this order


@dataclass(frozen=True)
class HostileInput:
    kind: str  # the input class
    seed: int
    index: int
    prefix: bytes  # the handshake up to `stage`, delivered and answered first
    data: bytes  # the hostile bytes
    expect: Expect
    stage: str = "none"

    @property
    def label(self) -> str:
        return f"{self.kind} (seed {self.seed}, input {self.index})"
