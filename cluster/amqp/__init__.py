"""AMQP 0-9-1 server side: framing and the I/O-free connection state machine."""
