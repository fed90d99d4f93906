"""The broker model as I/O-free state: messages, queues, exchanges, vhosts, users,
policies. It sees the client sessions and the cluster layer only through protocols of
its own (`cluster.core.clients`, `cluster.core.hosted`, `BrokerModel.cluster`)."""
