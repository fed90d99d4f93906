"""One client connection as an I/O-free state machine (the h11 pattern).

Feed it bytes with `receive_data` and time with `tick`; it puts outgoing bytes in
`outbox` and says through `should_close` and `reading_paused` what the socket should
do. Output is bounded as RabbitMQ's credit flow bounds it: while the socket cannot
take more (`output_stalled`) the connection is not read, deliveries wait once
`OUTBOX_LIMIT` bytes are queued, and a client that leaves its output unread for
`send_timeout` seconds is dropped.

Handshake: protocol header → start/start-ok (PLAIN or AMQPLAIN) → tune/tune-ok →
open/open-ok; then channels. A hard error closes the connection with
``connection.close``; a malformed byte stream never escapes as an exception.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING, Any

from pamqp import commands
from pamqp.base import Frame as Method

from cluster.amqp import framing
from cluster.amqp.channel import Channel
from cluster.amqp.errors import (
    ACCESS_REFUSED,
    CHANNEL_ERROR,
    COMMAND_INVALID,
    CONNECTION_FORCED,
    FRAME_ERROR,
    NOT_ALLOWED,
    UNEXPECTED_FRAME,
    AMQPError,
    ChannelError,
    ConnectionError_,
)
from cluster.core.users import may_log_in_from

if TYPE_CHECKING:
    from cluster.core.broker import Broker
    from cluster.core.vhost import VirtualHost

# Frames before tune-ok may be no larger than the spec's minimum frame size.
FRAME_MIN_SIZE = 4096
HANDSHAKE_TIMEOUT = 10.0
CLOSE_TIMEOUT = 3.0
# Bytes of output queued before deliveries wait for the shell to write it: a consumer
# with no prefetch limit takes a queue's messages a socket's worth at a time, not all.
OUTBOX_LIMIT = 1 << 20


class State(enum.Enum):
    AWAIT_HEADER = "await_header"
    AWAIT_START_OK = "await_start_ok"
    AWAIT_TUNE_OK = "await_tune_ok"
    AWAIT_OPEN = "await_open"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


def _credentials(mechanism: str, response: bytes) -> tuple[str, str]:
    if mechanism == "PLAIN":
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise ValueError("PLAIN response is not authzid NUL user NUL password")
        return parts[1].decode(), parts[2].decode()
    # AMQPLAIN: a field table without its length prefix.
    _, table = framing.decode_field_table(len(response).to_bytes(4, "big") + response)
    login, password = table.get("LOGIN"), table.get("PASSWORD")
    if not isinstance(login, str | bytes) or not isinstance(password, str | bytes):
        raise ValueError("AMQPLAIN response lacks LOGIN or PASSWORD")
    as_text = [v.decode() if isinstance(v, bytes) else v for v in (login, password)]
    return as_text[0], as_text[1]


class Connection:
    def __init__(self, broker: Broker, connection_id: int, peer: str) -> None:
        self.broker = broker
        self.id = connection_id
        self.peer = peer
        self.state = State.AWAIT_HEADER
        self.outbox: list[bytes] = []
        self._outbox_bytes = 0
        # Deliveries stopped for want of room in the outbox: resumed once it is written.
        self._room_wanted = False
        self.should_close = False
        # Since when the socket has taken no more output (None: it takes it).
        self.output_stalled_since: float | None = None
        self.user = ""
        self.vhost: VirtualHost
        self.client_properties: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        config = broker.config
        self.frame_max = FRAME_MIN_SIZE
        self.channel_max = config.channel_max
        self.heartbeat = 0
        self.channels: dict[int, Channel] = {}
        self._closing_channels: set[int] = set()
        self._reader = framing.FrameReader(FRAME_MIN_SIZE)
        self._header = b""
        # A channel waiting for another node's answer (basic.get on a remote queue, ...)
        # parks the connection: frames after it wait here so replies keep their order.
        self.parked = False
        self._backlog: deque[tuple[int, int, bytes]] = deque()
        now = broker.now()
        self.opened_at = now
        self._last_received = now
        self._last_sent = now
        self._close_deadline = 0.0
        self.has_published = False
        self.blocked = False
        self.close_reason = ""

    @property
    def peer_host(self) -> str:
        """The client's address without its port."""
        return self.peer.rpartition(":")[0]

    # -- output -------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if not self.outbox:
            self.broker.dirty.add(self)
        self.outbox.append(data)
        self._outbox_bytes += len(data)

    def send_many(self, frames: list[bytes]) -> None:
        if not self.outbox:
            self.broker.dirty.add(self)
        self.outbox.extend(frames)
        self._outbox_bytes += sum(len(frame) for frame in frames)

    def take_output(self) -> bytes:
        data = b"".join(self.outbox)
        self.outbox.clear()
        self._room_wanted = self._outbox_bytes >= OUTBOX_LIMIT
        self._outbox_bytes = 0
        if data:
            self._last_sent = self.broker.now()
        return data

    @property
    def writable(self) -> bool:
        """Whether deliveries may be queued now."""
        return self.output_stalled_since is None and self._outbox_bytes < OUTBOX_LIMIT

    @property
    def reading_paused(self) -> bool:
        """Blocked by the memory alarm, a publisher held while a peer link is backlogged,
        or its client is not taking our output: reading more would only queue more
        replies, returns and confirms for it."""
        return (self.blocked or self.output_stalled_since is not None
                or (self.has_published and self.broker.peer_flow))

    def output_stalled(self) -> None:
        """The shell: the socket's buffer is full."""
        if self.output_stalled_since is None:
            self.output_stalled_since = self.broker.now()

    def output_resumed(self) -> None:
        """The shell: the socket's buffer drained; reading and deliveries go on."""
        self.output_stalled_since = None
        self._room_wanted = False
        self.broker.dirty.add(self)
        self._dispatch_to_consumers()

    def output_written(self) -> None:
        """The shell wrote what `take_output` gave it: deliveries held back for room in
        the outbox go on."""
        if self._room_wanted and self.writable:
            self._room_wanted = False
            self._dispatch_to_consumers()

    def _dispatch_to_consumers(self) -> None:
        for channel in list(self.channels.values()):
            for consumer in list(channel.consumers.values()):
                consumer.queue.dispatch()

    def _send_method(self, channel: int, method: Method) -> None:
        self.send(framing.method_frame(channel, method))

    # -- input --------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        if self.state is State.CLOSED:
            return
        self._last_received = self.broker.now()
        try:
            if self.state is State.AWAIT_HEADER:
                data = self._receive_header(data)
                if not data:
                    return
            self._reader.feed(data)
            if not (self.parked or self._backlog):
                self._read_frames()
        except ConnectionError_ as error:
            self.close_with_error(error)

    def _read_frames(self) -> None:
        """Act on the frames read so far, a run at a time: the reader stops before a bad
        frame, which is an error only once the frames before it are answered (and a
        tune-ok among them has set the frame size it is held to)."""
        while not self.parked and self.state is not State.CLOSED:
            frames = self._reader.frames()
            if not frames:
                return
            for index, (frame_type, channel, payload) in enumerate(frames):
                self._receive_frame(frame_type, channel, payload)
                if self.state is State.CLOSED:
                    return
                if self.parked:
                    self._backlog.extend(frames[index + 1:])
                    return

    def park(self) -> None:
        self.parked = True

    def resume(self) -> None:
        """The awaited answer came: go on with the frames that arrived meanwhile."""
        self.parked = False
        backlog = self._backlog
        try:
            while backlog and not self.parked and self.state is not State.CLOSED:
                self._receive_frame(*backlog.popleft())
            self._read_frames()
        except ConnectionError_ as error:
            self.close_with_error(error)

    def channel_failed(self, channel: Channel, error: AMQPError) -> None:
        """A parked channel's continuation failed: a channel or connection error."""
        if isinstance(error, ConnectionError_):
            self.close_with_error(error)
        elif isinstance(error, ChannelError):
            self._close_channel(channel, error)

    def _receive_header(self, data: bytes) -> bytes:
        self._header += data
        if len(self._header) < 8:
            if not framing.PROTOCOL_HEADER.startswith(self._header):
                self._reject_protocol()
            return b""
        header, rest = self._header[:8], self._header[8:]
        if header != framing.PROTOCOL_HEADER:
            self._reject_protocol()
            return b""
        self._start()
        return rest

    def _reject_protocol(self) -> None:
        """Not AMQP 0-9-1: answer with the header we speak, then close (spec 4.2.2)."""
        self.send(framing.PROTOCOL_HEADER)
        self._finish("protocol header mismatch")

    def _start(self) -> None:
        self.state = State.AWAIT_START_OK
        self._send_method(0, commands.Connection.Start(
            version_major=0,
            version_minor=9,
            server_properties=self.broker.server_properties(),
            mechanisms="PLAIN AMQPLAIN",
            locales="en_US",
        ))

    def _receive_frame(self, frame_type: int, channel: int, payload: bytes) -> None:
        if frame_type == framing.FRAME_HEARTBEAT:
            if channel != 0:
                raise ConnectionError_(UNEXPECTED_FRAME, f"heartbeat frame on channel {channel}")
            if payload:
                raise ConnectionError_(FRAME_ERROR,
                                       f"heartbeat frame with a {len(payload)}-byte payload")
            return
        if frame_type not in (framing.FRAME_METHOD, framing.FRAME_HEADER, framing.FRAME_BODY):
            raise ConnectionError_(FRAME_ERROR, f"unknown frame type {frame_type}")
        if self.state is State.CLOSING:
            self._receive_while_closing(frame_type, channel, payload)
        elif channel == 0:
            if frame_type != framing.FRAME_METHOD:
                raise ConnectionError_(UNEXPECTED_FRAME, "content frame on channel 0")
            self._connection_method(framing.decode_method(payload))
        elif self.state is not State.OPEN:
            raise ConnectionError_(
                CHANNEL_ERROR, f"frame on channel {channel} before the connection is open"
            )
        else:
            self._channel_frame(frame_type, channel, payload)

    def _receive_while_closing(self, frame_type: int, channel: int, payload: bytes) -> None:
        """After we sent connection.close, only close/close-ok matter (spec 2.2.4)."""
        if channel != 0 or frame_type != framing.FRAME_METHOD:
            return
        method = framing.decode_method(payload)
        if isinstance(method, commands.Connection.Close):
            self._send_method(0, commands.Connection.CloseOk())
            self._finish("closed by client while closing")
        elif isinstance(method, commands.Connection.CloseOk):
            self._finish(self.close_reason)

    # -- connection class ---------------------------------------------------------------

    def _connection_method(self, method: Method | framing.Publish | framing.Ack) -> None:
        state = self.state
        if isinstance(method, commands.Connection.StartOk) and state is State.AWAIT_START_OK:
            self._start_ok(method)
        elif isinstance(method, commands.Connection.TuneOk) and state is State.AWAIT_TUNE_OK:
            self._tune_ok(method)
        elif isinstance(method, commands.Connection.Open) and state is State.AWAIT_OPEN:
            self._open(method)
        elif isinstance(method, commands.Connection.Close):
            self._close_all_channels()
            self._send_method(0, commands.Connection.CloseOk())
            self._finish("closed by client")
        elif isinstance(method, commands.Connection.Blocked | commands.Connection.Unblocked):
            return
        else:
            name = method.name if isinstance(method, Method) else type(method).__name__
            is_connection_method = isinstance(method, Method) and method.index >> 16 == 10
            # RabbitMQ: a connection method out of turn is a command error, any other
            # method on channel 0 a channel error.
            raise ConnectionError_(
                COMMAND_INVALID if is_connection_method else CHANNEL_ERROR,
                f"method {name} is not valid on channel 0 in state {state.value}",
            )

    def _start_ok(self, method: commands.Connection.StartOk) -> None:
        self.client_properties = dict(method.client_properties or {})
        capabilities = self.client_properties.get("capabilities")
        self.capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        if method.mechanism not in ("PLAIN", "AMQPLAIN"):
            raise ConnectionError_(
                COMMAND_INVALID,
                f"unknown authentication mechanism '{method.mechanism}'",
            )
        try:
            response = method.response
            raw = response.encode() if isinstance(response, str) else bytes(response)
            user, password = _credentials(method.mechanism, raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise ConnectionError_(
                ACCESS_REFUSED, f"malformed {method.mechanism} response: {error}", 10, 11
            ) from error
        refusal = self._login_refusal(user, password)
        if refusal is not None:
            self._refuse_login(method.mechanism, refusal)
            return
        self.user = user
        self.state = State.AWAIT_TUNE_OK
        config = self.broker.config
        self._send_method(0, commands.Connection.Tune(
            channel_max=config.channel_max,
            frame_max=config.frame_max,
            heartbeat=config.heartbeat,
        ))

    def _login_refusal(self, user: str, password: str) -> str | None:
        """Why ``user`` may not log in (RabbitMQ's wording), or None when she may."""
        if self.broker.users.authenticate(user, password) is None:
            return f"user '{user}' - invalid credentials"
        if not may_log_in_from(user, self.peer_host, self.broker.config.loopback_users):
            return f"user '{user}' can only connect via localhost"
        return None

    def _refuse_login(self, mechanism: str, refusal: str) -> None:
        """The event log gets the reason. Clients get what RabbitMQ gives them: one that
        says it can take it (authentication_failure_close) a connection.close without
        the reason, which would tell a guesser what was wrong; others a hung-up socket."""
        reason = f"{mechanism} login refused: {refusal}"
        self.broker.record_connection_error(
            self, ConnectionError_(ACCESS_REFUSED, reason, 10, 11))
        if not self.capabilities.get("authentication_failure_close"):
            self._finish(reason)
            return
        self._send_close(ConnectionError_(
            ACCESS_REFUSED,
            f"Login was refused using authentication mechanism {mechanism}. "
            "For details see the broker logfile.",
            10,
            11,
        ))

    def _tune_ok(self, method: commands.Connection.TuneOk) -> None:
        config = self.broker.config
        if method.frame_max and not FRAME_MIN_SIZE <= method.frame_max <= config.frame_max:
            raise ConnectionError_(
                NOT_ALLOWED,
                f"frame_max={method.frame_max} outside {FRAME_MIN_SIZE}..{config.frame_max}",
                10,
                31,
            )
        if method.channel_max > config.channel_max:
            raise ConnectionError_(
                NOT_ALLOWED,
                f"channel_max={method.channel_max} > {config.channel_max} max",
                10,
                31,
            )
        self.frame_max = method.frame_max or config.frame_max
        self._reader.frame_max = self.frame_max
        self.channel_max = method.channel_max or config.channel_max
        self.heartbeat = method.heartbeat
        self.state = State.AWAIT_OPEN

    def _open(self, method: commands.Connection.Open) -> None:
        vhost = self.broker.vhosts.get(method.virtual_host)
        if vhost is None:
            raise ConnectionError_(
                NOT_ALLOWED, f"vhost {method.virtual_host} not found", 10, 40
            )
        if not self.broker.users.can_access_vhost(self.user, vhost.name):
            raise ConnectionError_(
                NOT_ALLOWED,
                f"access to vhost '{vhost.name}' refused for user '{self.user}'",
                10,
                40,
            )
        self.vhost = vhost
        self.state = State.OPEN
        self._send_method(0, commands.Connection.OpenOk())
        if self.broker.alarm:
            self.block()

    # -- channels -----------------------------------------------------------------------

    def _channel_frame(self, frame_type: int, channel_id: int, payload: bytes) -> None:
        channel = self.channels.get(channel_id)
        if channel_id in self._closing_channels:
            self._receive_on_closing_channel(frame_type, channel_id, payload)
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
                self._close_channel(channel, error)
            return
        method = framing.decode_method(payload)
        if channel is None:
            if not isinstance(method, commands.Channel.Open):
                raise ConnectionError_(
                    CHANNEL_ERROR, f"expected 'channel.open' on channel {channel_id}"
                )
            if len(self.channels) >= self.channel_max:
                raise ConnectionError_(
                    NOT_ALLOWED,
                    f"number of channels opened ({len(self.channels)}) has reached the "
                    f"negotiated channel_max ({self.channel_max})",
                    20,
                    10,
                )
            self.channels[channel_id] = Channel(self, channel_id)
            self._send_method(channel_id, commands.Channel.OpenOk())
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
            self._close_channel(channel, error)

    def _receive_on_closing_channel(self, frame_type: int, channel_id: int, payload: bytes) -> None:
        """We sent channel.close: drop everything until close-ok (spec 2.3.6)."""
        if frame_type != framing.FRAME_METHOD:
            return
        method = framing.decode_method(payload)
        if isinstance(method, commands.Channel.CloseOk):
            self.forget_channel(channel_id)
        elif isinstance(method, commands.Channel.Close):
            self._send_method(channel_id, commands.Channel.CloseOk())
            self.forget_channel(channel_id)

    def _close_channel(self, channel: Channel, error: ChannelError) -> None:
        channel.close()
        self._closing_channels.add(channel.id)
        self.broker.record_channel_error(self, channel.id, error)
        self._send_method(channel.id, commands.Channel.Close(
            error.code, error.reply_text, error.class_id, error.method_id
        ))

    def forget_channel(self, channel_id: int) -> None:
        self.channels.pop(channel_id, None)
        self._closing_channels.discard(channel_id)

    def _close_all_channels(self) -> None:
        for channel in list(self.channels.values()):
            if not channel.closing:
                channel.close()
        self.channels.clear()
        self._closing_channels.clear()

    # -- closing ------------------------------------------------------------------------

    def close_with_error(self, error: ConnectionError_) -> None:
        """Hard error: close every channel and send connection.close with the reason."""
        if self.state in (State.CLOSING, State.CLOSED):
            return
        self.broker.record_connection_error(self, error)
        self._send_close(error)

    def _send_close(self, error: ConnectionError_) -> None:
        self._close_all_channels()
        self.close_reason = error.reply_text
        if self.state is State.AWAIT_HEADER:
            self._finish(error.reply_text)
            return
        self._send_method(0, commands.Connection.Close(
            error.code, error.reply_text, error.class_id, error.method_id
        ))
        self.state = State.CLOSING
        self._close_deadline = self.broker.now() + CLOSE_TIMEOUT

    def force_close(self, text: str) -> None:
        """The broker is going away (stop_app, shutdown): tell the client why."""
        self.close_with_error(ConnectionError_(CONNECTION_FORCED, text))

    def _finish(self, reason: str) -> None:
        self._close_all_channels()
        self.state = State.CLOSED
        self.should_close = True
        self.close_reason = reason
        self.broker.dirty.add(self)

    def connection_lost(self) -> None:
        """The socket is gone: channels close as if the client had closed them."""
        if self.state is not State.CLOSED:
            self._finish(self.close_reason or "connection lost")
        self.broker.forget_connection(self)

    # -- time and flow ------------------------------------------------------------------

    def tick(self) -> None:
        now = self.broker.now()
        stalled_since = self.output_stalled_since
        send_timeout = self.broker.config.send_timeout
        if stalled_since is not None and now - stalled_since > send_timeout:
            # It cannot hear a connection.close either: the reason goes to the event log.
            reason = f"client did not read its output for {send_timeout} s (send_timeout)"
            self.broker.record_connection_error(
                self, ConnectionError_(CONNECTION_FORCED, reason))
            self._finish(reason)
        elif self.state is State.OPEN and self.heartbeat:
            if self.reading_paused:
                # Its socket is not read, so its heartbeats cannot arrive. Like RabbitMQ,
                # do not count them as missed until reading resumes.
                self._last_received = now
            if now - self._last_received > 2 * self.heartbeat:
                self._finish(f"missed heartbeats from client, timeout: {self.heartbeat}s")
            elif now - self._last_sent >= self.heartbeat / 2:
                self.send(framing.HEARTBEAT_FRAME)
        elif self.state is State.CLOSING and now > self._close_deadline:
            self._finish(self.close_reason)
        elif self.state not in (State.OPEN, State.CLOSED) and (
            now - self.opened_at > HANDSHAKE_TIMEOUT
        ):
            self._finish("handshake timeout")

    def note_publish(self) -> None:
        if not self.has_published and self.broker.peer_flow:
            self.broker.dirty.add(self)  # to be paused now it is a publisher
        self.has_published = True
        if self.broker.alarm and not self.blocked:
            self.block()

    def block(self) -> None:
        """Memory alarm: publishers stop being read until it clears."""
        if not self.has_published or self.blocked:
            return
        self.blocked = True
        if self.capabilities.get("connection.blocked"):
            self._send_method(0, commands.Connection.Blocked(reason="low on memory"))
        self.broker.dirty.add(self)

    def unblock(self) -> None:
        if not self.blocked:
            return
        self.blocked = False
        if self.capabilities.get("connection.blocked"):
            self._send_method(0, commands.Connection.Unblocked())
        self.broker.dirty.add(self)
