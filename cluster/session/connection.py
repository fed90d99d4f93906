"""One client connection as an I/O-free state machine (the h11 pattern).

Feed it bytes with `receive_data` and time with `tick`; it puts outgoing bytes in
`outbox` and says through `should_close` and `reading_paused` what the socket should
do. Output is bounded as RabbitMQ's credit flow bounds it: while the socket cannot
take more (`output_stalled`) the connection is not read, deliveries wait once
`OUTBOX_LIMIT` bytes are queued, and a client that leaves its output unread for
`send_timeout` seconds is dropped.

Handshake: protocol header → start/start-ok (PLAIN or AMQPLAIN) → tune/tune-ok →
open/open-ok, each step checked by `handshake`; then channels, whose frames `Channels`
routes. A hard error closes the connection with ``connection.close``; a malformed byte
stream never escapes as an exception.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING, Any

from pamqp import commands
from pamqp.base import Frame as Method

from cluster.amqp import framing
from cluster.amqp.errors import (
    ACCESS_REFUSED,
    CHANNEL_ERROR,
    COMMAND_INVALID,
    CONNECTION_FORCED,
    FRAME_ERROR,
    UNEXPECTED_FRAME,
    AMQPError,
    ChannelError,
    ConnectionError_,
)
from cluster.session import handshake
from cluster.session.channels import Channels
from cluster.session.handshake import FRAME_MIN_SIZE

if TYPE_CHECKING:
    from cluster.core.vhost import VirtualHost
    from cluster.session.broker import Broker
    from cluster.session.channel import Channel

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
        self.channels = Channels(self)
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
            self.channels.fail(channel, error)

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
        self._send_method(0, handshake.start(self.broker.server_properties()))

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
            self.channels.receive(frame_type, channel, payload)

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
            self.channels.close_all()
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
        user, password = handshake.credentials(method)
        refusal = handshake.login_refusal(self.broker, user, password, self.peer_host)
        if refusal is not None:
            self._refuse_login(method.mechanism, refusal)
            return
        self.user = user
        self.state = State.AWAIT_TUNE_OK
        self._send_method(0, handshake.tune(self.broker.config))

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
        self.frame_max, self.channel_max = handshake.tuned(method, self.broker.config)
        self._reader.frame_max = self.frame_max
        self.heartbeat = method.heartbeat
        self.state = State.AWAIT_OPEN

    def _open(self, method: commands.Connection.Open) -> None:
        self.vhost = handshake.vhost_to_open(self.broker, self.user, method.virtual_host)
        self.state = State.OPEN
        self._send_method(0, commands.Connection.OpenOk())
        if self.broker.alarm:
            self.block()

    # -- closing ------------------------------------------------------------------------

    def close_with_error(self, error: ConnectionError_) -> None:
        """Hard error: close every channel and send connection.close with the reason."""
        if self.state in (State.CLOSING, State.CLOSED):
            return
        self.broker.record_connection_error(self, error)
        self._send_close(error)

    def _send_close(self, error: ConnectionError_) -> None:
        self.channels.close_all()
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
        self.channels.close_all()
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
