"""Node-to-node links: framing, failure detection and partition detection.

Every directed link (this node → a peer) is its own TCP connection to the address
configured for that peer, so a harness that routes each address through its own
proxy can cut or degrade one direction alone.
"""
