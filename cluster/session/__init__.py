"""AMQP sessions: the I/O-free connection and channel state machines, and the broker
that serves them on the broker model (`cluster.core`).

Channels use queues only through `cluster.core.hosted.HostedQueue`, whichever kind the
vhost holds, so this package knows nothing of the cluster layer (`cluster.ha`).
"""
