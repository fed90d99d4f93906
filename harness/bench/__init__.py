"""`mirrorchaos bench`: the same workload, with the same client, against AMQP brokers.

Each broker URL is measured in turn by a series of stages; figures of the first URL
are the reference and every other URL gets the ratio of its figures to the first
one's. The modules:

* `url`: AMQP URLs, parsed with RabbitMQ's defaults, shown without the password;
* `client`: the lean AMQP 0-9-1 client (frames by `cluster.amqp.framing`);
* `confirms`: one publishing run's confirm bookkeeping;
* `stats`: percentiles, ratios, pauses in a confirm stream;
* `stages`: the workload, the stage registry and its stages;
* `command`: the run and its JSON report, what the ``bench`` subcommand calls.

The package exports what the ``bench`` subcommand's argument parsing
(harness/commands.py) and scripts/flood-report use.
"""

from __future__ import annotations

from harness.bench.command import run
from harness.bench.stages import DEFAULT_STAGES, DELIVERIES, STAGES, Delivery, Workload
from harness.bench.url import AmqpUrl, parse_amqp_url

__all__ = [
    "DEFAULT_STAGES",
    "DELIVERIES",
    "STAGES",
    "AmqpUrl",
    "Delivery",
    "Workload",
    "parse_amqp_url",
    "run",
]
