"""The broker's logic as I/O-free state: messages, queues, exchanges, vhosts, users."""
