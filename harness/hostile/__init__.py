"""Hostile input for the broker's AMQP front door: a seeded generator of inputs that
each name the answer they must get, and runners that feed them to the broker in memory
or to a live node over sockets, beside a well-behaved client.

* `inputs`: the generator and its classes (`frames`, `login`, `content`, `tables`,
  `noise`), on `wire` (hand-built frames), `methods` and `context` (handshake
  prefixes, limits);
* `expect` and `judge`: the answers due, and reading and judging what came back;
* `memory` and `live`: the runners; `tally`: counting a run.

Used by tests/amqp/test_hostile_fuzz.py, tests/node/test_hostile_live.py and
scripts/fuzz-hostile.
"""
