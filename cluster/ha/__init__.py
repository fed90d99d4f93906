"""Clustering: replicated metadata, queues reached from any node, mirrored queues.

The coordinator (`cluster.ha.coordinator`) is I/O-free: the node shell feeds it peer
envelopes and peer up/down events and sends the envelopes it takes from its outbox.
"""
