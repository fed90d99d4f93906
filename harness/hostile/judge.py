"""Reading what the broker answered to a hostile input, and judging it."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pamqp import commands, frame
from pamqp.base import Frame as Method
from pamqp.exceptions import UnmarshalingException

from harness.hostile import wire
from harness.hostile.expect import (
    ANY,
    CHANNEL_CLOSE,
    CHANNEL_CODES,
    CLOSE,
    CONNECTION_CODES,
    HANG_UP,
    HEADER,
    SERVED,
    WAITING,
    Expect,
    Reply,
)

_CLOSES = {commands.Connection.Close.index, commands.Channel.Close.index}


@dataclass(frozen=True)
class Closed:
    """A connection.close (channel 0) or channel.close the broker sent."""

    channel: int
    code: int
    text: str

    @property
    def connection(self) -> bool:
        return self.channel == 0


@dataclass
class Answer:
    """What the broker sent, read frame by frame."""

    header: bool = False  # it sent its protocol header
    replies: list[Reply] = field(default_factory=list)  # every method, in order
    closes: list[Closed] = field(default_factory=list)
    garbage: str = ""  # output that is not AMQP
    _buffer: bytes = b""

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data
        if not self.replies and not self.header and buffer.startswith(b"AMQP"):
            if len(buffer) < 8:
                self._buffer = buffer
                return
            self.header = True
            if buffer[:8] != wire.PROTOCOL_HEADER:
                self.garbage = f"a protocol header that is not ours: {buffer[:8]!r}"
            buffer = buffer[8:]
        offset = 0
        while not self.garbage and len(buffer) - offset >= 8:
            kind, channel, size = struct.unpack_from(">BHI", buffer, offset)
            end = offset + 7 + size
            if end >= len(buffer):
                break
            if buffer[end] != wire.FRAME_END or kind not in (1, 2, 3, 8):
                self.garbage = f"not a frame: {bytes(buffer[offset : offset + 16])!r}"
                break
            if kind == wire.METHOD:
                self._method(channel, buffer[offset : end + 1], buffer[offset + 7 : end])
            offset = end + 1
        self._buffer = buffer[offset:]

    def _method(self, channel: int, raw: bytes, payload: bytes) -> None:
        index = struct.unpack_from(">I", payload)[0] if len(payload) >= 4 else -1
        method: type[Method] | None = commands.INDEX_MAPPING.get(index)
        if method is None:
            self.garbage = f"an unknown method frame: {raw[:16]!r}"
            return
        self.replies.append((channel, method.name))
        if index in _CLOSES:
            try:
                _, _, close = frame.unmarshal(raw)
            except UnmarshalingException as error:
                self.garbage = f"a close that does not decode: {error}"
                return
            assert isinstance(close, commands.Connection.Close | commands.Channel.Close)
            self.closes.append(Closed(channel, close.reply_code or 0, close.reply_text or ""))

    @property
    def connection_close(self) -> Closed | None:
        return next((c for c in self.closes if c.connection), None)


def _subsequence(wanted: tuple[Reply, ...], replies: list[Reply]) -> bool:
    it = iter(replies)
    return all(reply in it for reply in wanted)


def invariants(answer: Answer) -> list[str]:
    """What every answer must satisfy, whatever the input: AMQP output, closes with a
    code the input may get and a reply text, and nothing after connection.close but
    close-ok."""
    problems = []
    if answer.garbage:
        problems.append(f"the broker sent {answer.garbage}")
    for close in answer.closes:
        allowed = CONNECTION_CODES if close.connection else CHANNEL_CODES
        what = "connection.close" if close.connection else f"channel.close on {close.channel}"
        if close.code not in allowed:
            problems.append(f"{what} with code {close.code} ({close.text!r})")
        if not close.text.strip():
            problems.append(f"{what} {close.code} without a reply text")
    connection_closes = [c for c in answer.closes if c.connection]
    if len(connection_closes) > 1:
        problems.append(f"{len(connection_closes)} connection.close methods")
    if connection_closes:
        after = answer.replies[answer.replies.index((0, "Connection.Close")) + 1:]
        if any(reply != (0, "Connection.CloseOk") for reply in after):
            problems.append(f"frames after connection.close: {after}")
    return problems


def judge(expect: Expect, answer: Answer, closed: bool, live: bool = False) -> list[str]:
    """Problems with ``answer`` for an input that must get ``expect``. ``closed``: the
    broker ended the connection (in memory: it should close; on a socket: it closed
    before we did). On a socket, ``closed`` is unknown for endings where the client
    hangs up itself (waiting, served, channel-close, any)."""
    problems = invariants(answer)
    ending = expect.ending
    close = answer.connection_close
    if ending == ANY:
        return problems
    if not _subsequence(expect.replies, answer.replies):
        problems.append(f"expected replies {list(expect.replies)}, got {answer.replies}")
    if ending == HEADER:
        if not answer.header or answer.replies or not closed:
            problems.append(f"expected our protocol header and a closed socket, got header="
                            f"{answer.header} replies={answer.replies} closed={closed}")
        return problems
    if answer.header:
        problems.append("unexpected protocol header")
    if ending == CLOSE:
        if close is None:
            problems.append(f"expected connection.close {expect.code}, got none "
                            f"(replies {answer.replies}, closed={closed})")
        elif close.code != expect.code or expect.text not in close.text:
            problems.append(f"expected connection.close {expect.code} saying "
                            f"{expect.text!r}, got {close.code} {close.text!r}")
        if any(not c.connection for c in answer.closes):
            problems.append(f"unexpected channel.close: {answer.closes}")
        return problems
    if close is not None:
        problems.append(f"unexpected connection.close {close.code} {close.text!r}")
    if ending == HANG_UP:
        if not closed:
            problems.append("expected the broker to hang up")
        return problems
    if ending == CHANNEL_CLOSE:
        channel_closes = [(c.channel, c.code) for c in answer.closes]
        if channel_closes != [(1, expect.code)] or expect.text not in answer.closes[0].text:
            problems.append(f"expected channel.close {expect.code} on channel 1 saying "
                            f"{expect.text!r}, got {answer.closes}")
    elif any(not c.connection for c in answer.closes):
        problems.append(f"unexpected channel.close: {answer.closes}")
    if ending in (SERVED, WAITING, CHANNEL_CLOSE) and closed and not live:
        problems.append("the broker closed a connection that should stay open")
    return problems
