"""A connection's channels, by number: opening one, handing it the frames sent on its
number, and closing it on a channel error with the close handshake that follows (spec
2.3.6: once we sent channel.close, all but close and close-ok is dropped).

`Connection` owns channel 0 and the connection's state; it hands this table the frames
for other channels once the connection is open.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pamqp import commands
from pamqp.base import Frame as Method

from cluster.amqp import framing
from cluster.amqp.errors import (
    CHANNEL_ERROR,
    COMMAND_INVALID,
    NOT_ALLOWED,
    UNEXPECTED_FRAME,
    ChannelError,
    ConnectionError_,
)
from cluster.session.channel import Channel

if TYPE_CHECKING:
    from cluster.session.connection import Connection


class Channels(Mapping[int, Channel]):
    """Read-only to everyone but its connection, which changes it through the methods."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._open: dict[int, Channel] = {}
        self._closing: set[int] = set()  # we sent channel.close, no close-ok yet

    def __getitem__(self, channel_id: int) -> Channel:
        return self._open[channel_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._open)

    def __len__(self) -> int:
        return len(self._open)

    def receive(self, frame_type: int, channel_id: int, payload: bytes) -> None:
        """A method, header or body frame on a channel other than 0."""
        channel = self._open.get(channel_id)
        if channel_id in self._closing:
            self._receive_while_closing(frame_type, channel_id, payload)
            return
        if frame_type != framing.FRAME_METHOD:
            if channel is None:
                raise ConnectionError_(
                    UNEXPECTED_FRAME, f"content frame on channel {channel_id}, which is not open"
                )
            try:
                if frame_type == framing.FRAME_HEADER:
                    channel.handle_header(framing.decode_content_header(payload))
                else:
                    channel.handle_body(payload)
            except ChannelError as error:
                self.fail(channel, error)
            return
        method = framing.decode_method(payload)
        if channel is None:
            self._open_channel(channel_id, method)
            return
        if isinstance(method, commands.Channel.Open):
            raise ConnectionError_(
                CHANNEL_ERROR, f"second 'channel.open' seen on channel {channel_id}", 20, 10
            )
        if isinstance(method, Method) and method.index >> 16 == 10:
            raise ConnectionError_(
                COMMAND_INVALID, f"connection method {method.name} on channel {channel_id}"
            )
        try:
            channel.handle_method(method)
        except ChannelError as error:
            self.fail(channel, error)

    def _open_channel(self, channel_id: int,
                      method: Method | framing.Publish | framing.Ack) -> None:
        if not isinstance(method, commands.Channel.Open):
            raise ConnectionError_(
                CHANNEL_ERROR, f"expected 'channel.open' on channel {channel_id}"
            )
        channel_max = self._connection.channel_max
        if len(self._open) >= channel_max:
            raise ConnectionError_(
                NOT_ALLOWED,
                f"number of channels opened ({len(self._open)}) has reached the "
                f"negotiated channel_max ({channel_max})",
                20,
                10,
            )
        self._open[channel_id] = Channel(self._connection, channel_id)
        self._send_method(channel_id, commands.Channel.OpenOk())

    def _receive_while_closing(self, frame_type: int, channel_id: int, payload: bytes) -> None:
        """We sent channel.close: drop everything until close-ok."""
        if frame_type != framing.FRAME_METHOD:
            return
        method = framing.decode_method(payload)
        if isinstance(method, commands.Channel.CloseOk):
            self.forget(channel_id)
        elif isinstance(method, commands.Channel.Close):
            self._send_method(channel_id, commands.Channel.CloseOk())
            self.forget(channel_id)

    def fail(self, channel: Channel, error: ChannelError) -> None:
        """Close ``channel`` with ``error``; its number is free again at close-ok."""
        channel.close()
        self._closing.add(channel.id)
        self._connection.broker.record_channel_error(self._connection, channel.id, error)
        self._send_method(channel.id, commands.Channel.Close(
            error.code, error.reply_text, error.class_id, error.method_id
        ))

    def forget(self, channel_id: int) -> None:
        """The channel's close handshake is over."""
        self._open.pop(channel_id, None)
        self._closing.discard(channel_id)

    def close_all(self) -> None:
        """The connection ends: every channel ends with it."""
        for channel in list(self._open.values()):
            if not channel.closing:
                channel.close()
        self._open.clear()
        self._closing.clear()

    def _send_method(self, channel_id: int, method: Method) -> None:
        self._connection.send(framing.method_frame(channel_id, method))
